/** postgres.js (TCP): Node, Deno and Workers with `nodejs_compat`. */
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { countingLogger, type Database, type Db, type QueryStats } from "../database.ts";

export interface PostgresJsOptions {
  url: string;
  /** Pool size (default 10). On Workers keep it at 1–5: clients are per request. */
  max?: number;
  /** Prepared statements; off for transaction-mode poolers such as PgBouncer/Hyperdrive. */
  prepare?: boolean;
}

export function createPostgresJsDatabase(opts: PostgresJsOptions): Database {
  const stats: QueryStats = { statements: 0 };
  const client = postgres(opts.url, {
    max: opts.max ?? 10,
    prepare: opts.prepare ?? true,
    onnotice: () => {},
    // bytea and int8 come back as Buffer/string; storage normalizes them.
  });
  const db = drizzle(client, { logger: countingLogger(stats) }) as unknown as Db;
  return {
    driver: "postgres-js",
    db,
    stats,
    concurrent: true,
    close: () => client.end({ timeout: 5 }),
  };
}
