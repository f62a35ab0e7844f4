/**
 * postgres.js (TCP): Node, Deno and Workers with `nodejs_compat`.
 *
 * drizzle runs raw statements through postgres.js `unsafe()` with
 * `prepare: false`, so Postgres would parse and plan every storage statement
 * on every call. Unless told otherwise (`prepare: false`, for transaction-mode
 * poolers such as PgBouncer or Hyperdrive), the client is wrapped so that
 * `unsafe()` prepares — inside transactions and savepoints too — and each
 * connection plans a statement once. Measured in bench/: Postgres CPU per step
 * roughly halves.
 *
 * Transactions are fenced (postgres-js-fence.ts): once a transaction's
 * connection dropped, its callback can no longer send statements anywhere.
 */
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { countingLogger, type Database, type Db, type QueryStats } from "../database.ts";
import { createFencing } from "./postgres-js-fence.ts";

export type { Database, Db, DriverName, QueryStats } from "../database.ts";

export interface PostgresJsOptions {
  url: string;
  /** Pool size (default 10). On Workers keep it at 1–5: clients are per request. */
  max?: number;
  /** Named prepared statements (default true); false for transaction-mode poolers. */
  prepare?: boolean;
}

export function createPostgresJsDatabase(opts: PostgresJsOptions): Database {
  const stats: QueryStats = { statements: 0 };
  const prepare = opts.prepare ?? true;
  // postgres.js fetches the array types on every new connection, with a promise nobody handles: a connection
  // dropped during that fetch is an unhandled rejection, which ends a Node process. The types are shared by
  // the client's connections, so once one has them, later (re)connections skip the fetch.
  const fencing = createFencing({ onTypesKnown: () => void ((client.options as { fetch_types: boolean }).fetch_types = false) });
  const client = postgres(opts.url, {
    max: opts.max ?? 10,
    prepare,
    onnotice: () => {},
    onclose: fencing.onclose,
  });
  const db = drizzle(fencing.wrap(client, prepare), { logger: countingLogger(stats) }) as unknown as Db;
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
