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
 */
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { countingLogger, type Database, type Db, type QueryStats } from "../database.ts";

export type { Database, Db, DriverName, QueryStats } from "../database.ts";

export interface PostgresJsOptions {
  url: string;
  /** Pool size (default 10). On Workers keep it at 1–5: clients are per request. */
  max?: number;
  /** Named prepared statements (default true); false for transaction-mode poolers. */
  prepare?: boolean;
}

type Client = ReturnType<typeof postgres>;

/** The client with `unsafe` always preparing, also in the clients `begin`/`savepoint` hand out. */
function preparing(client: Client): Client {
  return new Proxy(client, {
    get(target, key) {
      const t = target as unknown as Record<string | symbol, unknown> & Client;
      if (key === "unsafe") return (q: string, p: unknown[] = [], o: object = {}) => t.unsafe(q, p as never, { ...o, prepare: true });
      if (key === "begin" || key === "savepoint") {
        return (...args: unknown[]) => {
          const fn = args.pop() as (c: Client) => unknown;
          return (t[key] as (...a: unknown[]) => unknown)(...args, (c: Client) => fn(preparing(c)));
        };
      }
      const v = t[key];
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

export function createPostgresJsDatabase(opts: PostgresJsOptions): Database {
  const stats: QueryStats = { statements: 0 };
  const prepare = opts.prepare ?? true;
  const client = postgres(opts.url, {
    max: opts.max ?? 10,
    prepare,
    onnotice: () => {},
  });
  const db = drizzle(prepare ? preparing(client) : client, { logger: countingLogger(stats) }) as unknown as Db;
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
