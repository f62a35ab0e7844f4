// The set-up the runtime test files share: a fresh migrated database on the
// test Postgres and the processes under test on it — one `wrangler dev`
// (functions/worker.ts under workerd), or two Node workers for the crash
// tests — started in the file's beforeAll and stopped, the processes first,
// then the file's own database client, in its afterAll. Register it where
// the file's other hooks are: vitest runs beforeAll hooks in the order they
// were registered, so a hook registered before it (a Neon proxy) has run
// when `vars` is read.
import { afterAll, beforeAll, expect } from "vitest";
import type { Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { startNodeScript, startWrangler, type Server } from "./processes.ts";

/** Filled in by the beforeAll: read it inside tests and hooks, never at the top of the file. */
export interface OnFreshDatabase {
  databaseUrl: string;
  /** The file's own client of the database (to look at rows). */
  db: Database;
}

async function openFresh(t: OnFreshDatabase, prefix: string, max: number): Promise<void> {
  t.databaseUrl = await freshDatabase(prefix);
  t.db = createPostgresJsDatabase({ url: t.databaseUrl, max });
  await migrate(t.db.db);
}

export interface WorkerOptions {
  /** EDDA_PUBLIC_URL names the server's own address (follow-ups as plain fetches instead of the ctx.exports loopback). */
  publicUrl?: boolean;
  /** How the afterAll stops wrangler (default SIGTERM). */
  stopSignal?: NodeJS.Signals;
  /** The beforeAll's timeout (default 90 s: wrangler's first start bundles the Worker). */
  timeoutMs?: number;
}

export interface WorkerUnderTest extends OnFreshDatabase {
  worker: Server;
  /** What wrangler was started with. */
  vars: Record<string, string>;
  /** A new wrangler on the same database and vars (after the test stopped or killed the last one). */
  restart(): Promise<Server>;
}

/**
 * `wrangler dev` on a fresh database named after `prefix`, in open mode
 * (EDDA_ALLOW_UNAUTHENTICATED=1) unless `vars` says otherwise; `vars` gets
 * the database URL and is read when the worker starts.
 */
export function startWorkerWith(prefix: string, vars: (databaseUrl: string) => Record<string, string>, opts: WorkerOptions = {}): WorkerUnderTest {
  const t = {} as WorkerUnderTest;
  const start = () => startWrangler(t.vars, { publicUrl: opts.publicUrl ?? false });
  t.restart = async () => (t.worker = await start());
  beforeAll(async () => {
    await openFresh(t, prefix, 2);
    t.vars = { DATABASE_URL: t.databaseUrl, EDDA_ALLOW_UNAUTHENTICATED: "1", ...vars(t.databaseUrl) };
    t.worker = await start();
  }, opts.timeoutMs ?? 90_000);
  afterAll(async () => {
    await t.worker?.stop(opts.stopSignal);
    await t.db?.close();
  });
  return t;
}

/** One cron invocation through wrangler's `/__scheduled` (started with --test-scheduled), answered 200. */
export async function fireCron(base: string): Promise<void> {
  const res = await fetch(`${base}/__scheduled?cron=${encodeURIComponent("* * * * *")}`);
  expect(res.status).toBe(200);
  await res.text();
}

export interface WorkerPair extends OnFreshDatabase {
  /** worker-a: its slow steps take `slowMs`, long enough for the test to kill it mid-step. */
  a: Server;
  /** worker-b: no delay; its sweeper takes over once A's lease expires. */
  b: Server;
}

/**
 * Two Node workers serving `script` (through tsx) on one fresh database, for
 * the crash tests: EDDA_SERVICE_NAME worker-a and worker-b, SLOW_MS `slowMs`
 * and 0. `prepare` runs on the database before they start. The afterAll
 * kills A (SIGKILL: it may be mid-step still) and stops B.
 */
export function startWorkerPair(prefix: string, script: string, opts: { secret: string; slowMs: number; prepare?: (db: Database) => Promise<void> }): WorkerPair {
  const t = {} as WorkerPair;
  beforeAll(async () => {
    await openFresh(t, prefix, 2);
    await opts.prepare?.(t.db);
    const env = { DATABASE_URL: t.databaseUrl, EDDA_SECRET: opts.secret };
    [t.a, t.b] = await Promise.all([
      startNodeScript(script, { ...env, EDDA_SERVICE_NAME: "worker-a", SLOW_MS: String(opts.slowMs) }),
      startNodeScript(script, { ...env, EDDA_SERVICE_NAME: "worker-b", SLOW_MS: "0" }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([t.a?.stop("SIGKILL"), t.b?.stop()]);
    await t.db?.close();
  });
  return t;
}
