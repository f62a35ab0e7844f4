/**
 * The driver-neutral database handle. Each driver factory in `drivers/` returns
 * one; the Storage implementation and user activities (`ctx.tx`) only ever see
 * drizzle's `PgDatabase` / `PgTransaction`, so the same code runs on postgres.js,
 * Neon's serverless WebSocket Pool and PGlite.
 */
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from "drizzle-orm/pg-core";
import type { ExtractTablesWithRelations } from "drizzle-orm";
import type { SQL } from "drizzle-orm";

export type DriverName = "postgres-js" | "neon-serverless" | "pglite";

/** A drizzle database on any supported driver. */
export type Db = PgDatabase<PgQueryResultHKT, Record<string, never>>;
/** A drizzle transaction on any supported driver (what activities get as `ctx.tx`). */
export type Tx = PgTransaction<PgQueryResultHKT, Record<string, never>, ExtractTablesWithRelations<Record<string, never>>>;
/** Something that can run SQL: the database or a transaction/savepoint. */
export type Executor = Db | Tx;

export interface QueryStats {
  /** SQL statements issued through drizzle (BEGIN/COMMIT excluded). */
  statements: number;
}

export interface Database {
  readonly driver: DriverName;
  readonly db: Db;
  readonly stats: QueryStats;
  /** Whether several connections may run at once (false for PGlite). */
  readonly concurrent: boolean;
  /**
   * LISTEN on a channel: `onPayload` gets each NOTIFY payload until the
   * returned function is called. Absent where the driver cannot listen.
   */
  listen?(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/**
 * What an edge adapter hands a driver to open one client: the edge adapters
 * (Workers, Deno) take drivers as values (`postgresJs`, `neonServerless`),
 * so a bundle holds only the drivers its entry imports.
 */
export interface DriverConnection {
  url: string;
  /** Pool size (small where a client lives for one request). */
  max: number;
  /** The client lives for one request (Workers): no named prepared statements. */
  perRequest: boolean;
  /** NEON_WS_PROXY: a local WebSocket→TCP proxy for Neon's driver (local development, tests). */
  wsProxy: string | undefined;
}

/** A serverless driver as a value: its DATABASE_DRIVER name and how it opens a client. */
export interface DatabaseDriver {
  readonly name: Exclude<DriverName, "pglite">;
  open(connection: DriverConnection): Database;
}

/**
 * Leads the text of a transaction's last statement (a step's fenced conclusion, which fails when its
 * fence does not hold). A driver may then send it alone, autocommitted, when it is the
 * transaction's only statement (drivers/postgres-js-lazy-tx.ts).
 * Elsewhere it is a comment.
 */
export const LAST_STATEMENT = "/* edda:last */ ";

/** A drizzle logger that counts statements, for the per-step statement budget. */
export function countingLogger(stats: QueryStats) {
  return { logQuery: () => void stats.statements++ };
}

/**
 * Run a raw SQL statement and return its rows, whatever shape the driver's
 * result has (postgres.js returns an array, pg-compatible drivers `{ rows }`).
 */
export async function queryRows<T = Record<string, unknown>>(ex: Executor, query: SQL): Promise<T[]> {
  const res: unknown = await ex.execute(query);
  if (Array.isArray(res)) return res as T[];
  return ((res as { rows?: T[] }).rows ?? []) as T[];
}
