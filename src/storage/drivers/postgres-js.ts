/**
 * postgres.js (TCP): Node, Deno and Workers with `nodejs_compat`.
 *
 * drizzle runs raw statements through postgres.js `unsafe()` with
 * `prepare: false`, so Postgres would parse and plan every storage statement
 * on every call. By default the client is wrapped so that `unsafe()` prepares
 * — inside transactions and savepoints too — and each connection plans a
 * statement once: measured in bench/, Postgres CPU per step roughly halves.
 * That pays on connections that live long; on a client opened per request (a
 * Worker, a queue-consumer invocation) every statement is new to its
 * connection and preparing it is one more round trip. `prepare: false` (also
 * the setting for transaction-mode poolers: PgBouncer, Hyperdrive) sends
 * unnamed statements with their values written in (postgres-js-inline.ts):
 * one flight each.
 *
 * No connection fetches the array types (postgres-js-types.ts declares
 * them), so a new connection's first statement goes with its start-up.
 *
 * Transactions begin with their first statement (postgres-js-lazy-tx.ts):
 * a step's lone fenced conclusion goes without BEGIN and COMMIT.
 *
 * Transactions are fenced (postgres-js-fence.ts): once a transaction's
 * connection dropped, its callback can no longer send statements anywhere.
 * Results are kept dense (postgres-js-rows.ts): after a connection dropped
 * mid-result, postgres.js would shift the next result's rows up.
 */
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { countingLogger, type Database, type DatabaseDriver, type Db, type QueryStats } from "../database.ts";
import { createFencing } from "./postgres-js-fence.ts";
import { declareArrayTypes, type PostgresJsTypeOptions } from "./postgres-js-types.ts";

export type { Database, DatabaseDriver, Db, DriverConnection, DriverName, QueryStats } from "../database.ts";

export interface PostgresJsOptions {
  url: string;
  /** Pool size (default 10). On Workers keep it at 1–5: clients are per request. */
  max?: number;
  /**
   * Named prepared statements (default true): for clients that live long.
   * false: unnamed statements, values as literals, one round trip each — for
   * clients opened per request and for transaction-mode poolers.
   */
  prepare?: boolean;
  /**
   * Transactions begin with their first statement (default true, postgres-js-lazy-tx.ts): a step whose
   * transaction holds only its fenced conclusion (its activity never touched `ctx.tx`) sends that alone,
   * autocommitted — one round trip instead of three. false: every transaction is BEGIN … COMMIT.
   */
  lazyTransactions?: boolean;
  /**
   * A transaction that does begin sends BEGIN with its first statement and COMMIT with its last, the
   * step's conclusion (default true, postgres-js-pipeline.ts). false: BEGIN and COMMIT each a round trip.
   */
  pipeline?: boolean;
}

export function createPostgresJsDatabase(opts: PostgresJsOptions): Database {
  const stats: QueryStats = { statements: 0 };
  const prepare = opts.prepare ?? true;
  const fencing = createFencing({ lazy: opts.lazyTransactions ?? true, pipeline: opts.pipeline ?? true });
  const client = postgres(opts.url, {
    max: opts.max ?? 10,
    prepare,
    // Declared below instead: fetching them costs every new connection a round trip before its first statement.
    fetch_types: false,
    onnotice: () => {},
    onclose: fencing.onclose,
  });
  declareArrayTypes(client.options as unknown as PostgresJsTypeOptions);
  const db = drizzle(fencing.wrap(client, prepare ? "prepared" : "inline"), { logger: countingLogger(stats) }) as unknown as Db;
  return {
    driver: "postgres-js",
    db,
    stats,
    concurrent: true,
    // postgres.js runs every LISTEN of a client on one dedicated connection.
    listen: async (channel, onPayload) => {
      const l = await client.listen(channel, onPayload);
      return () => l.unlisten();
    },
    close: () => client.end({ timeout: 5 }),
  };
}

/**
 * postgres.js for the edge adapters (TCP, Hyperdrive on Workers): a client
 * opened per request sends unnamed statements with their values written in,
 * one round trip each, instead of preparing statements its connection will
 * not see again.
 */
export const postgresJs: DatabaseDriver = {
  name: "postgres-js",
  open: ({ url, max, perRequest }) => createPostgresJsDatabase({ url, max, prepare: !perRequest }),
};
