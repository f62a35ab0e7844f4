/**
 * The driver-neutral database handle. Each driver factory in `drivers/` returns
 * one; the Storage implementation and user activities (`ctx.tx`) only ever see
 * drizzle's `PgDatabase` / `PgTransaction`, so the same code runs on postgres.js,
 * Neon's serverless WebSocket Pool and PGlite.
 */
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from "drizzle-orm/pg-core";
import type { ExtractTablesWithRelations } from "drizzle-orm";
import type { SQL, SQLWrapper } from "drizzle-orm";

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

/**
 * A transaction's client may answer to this (drivers/postgres-js-lazy-tx.ts): asked before the
 * transaction's last statement, it returns true when nothing was sent in the transaction yet, and from
 * then on refuses every statement in it, as if its last one had been sent. The caller then sends that
 * last statement outside the transaction, with others (group commit, engine/group-commit.ts).
 */
export const SEND_LAST_ALONE = Symbol.for("edda.sendLastAlone");

/** Whether `ex`'s transaction has sent nothing and now takes nothing more (see SEND_LAST_ALONE); false elsewhere. */
export function sendLastAlone(ex: Executor): boolean {
  // drizzle keeps the driver's transaction client on the transaction's session.
  const client = (ex as unknown as { session?: { client?: Record<symbol, unknown> } }).session?.client;
  const claim = client?.[SEND_LAST_ALONE];
  return typeof claim === "function" && (claim as () => boolean)() === true;
}

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

/**
 * Run a statement whose text is built already (`$n` placeholders, the values in `params`): drizzle hands
 * text and parameters to the driver as they are, without building a query (conclusion.ts).
 */
export async function queryText<T = Record<string, unknown>>(ex: Executor, text: string, params: unknown[]): Promise<T[]> {
  const query = { sql: text, params };
  // What drizzle's execute() reads of an SQL object: toQuery() gives the text and its parameters.
  const built: SQLWrapper = { getSQL: () => ({ toQuery: () => query }) as unknown as SQL };
  const res: unknown = await ex.execute(built);
  if (Array.isArray(res)) return res as T[];
  return ((res as { rows?: T[] }).rows ?? []) as T[];
}
