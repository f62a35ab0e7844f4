/**
 * Chaos driver: several real worker processes on one Postgres, a random one
 * SIGKILLed every few hundred milliseconds and restarted, their database
 * connections terminated, the Postgres server restarted (see faults.ts),
 * while a mix of workflows runs (transactional rows, sleeps, competing and
 * broadcast messages, saga failures, cancellations, statement timeouts inside
 * transactional activities). Then every invariant is checked: each instance
 * terminal with the outcome its input implies, each transactional row exactly
 * once, each competing message consumed exactly once, broadcast listeners
 * complete and in order, no lease left held.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { toPayload } from "../../src/core/serialization.ts";
import { freePort } from "../../test/support/postgres-cluster.ts";
import { startFaults, WORKER_APP_NAME, type FaultCounts } from "./faults.ts";
import { CHAOS_TABLES } from "./workflows.ts";

export interface ChaosOptions {
  databaseUrl: string;
  workers?: number;
  steps?: number;
  sagas?: number;
  consumers?: number;
  jobsPerConsumer?: number;
  listeners?: number;
  news?: number;
  cancels?: number;
  /** chaos_slow instances; instance i hits i % 3 statement timeouts before its activity succeeds. */
  slow?: number;
  killEveryMs?: [number, number];
  /** Terminate one worker connection every [min, max] ms (null: never). */
  backendKillEveryMs?: [number, number] | null;
  /** Restart Postgres this many times, `pgRestartEveryMs` apart (needs `restartPostgres`). */
  pgRestarts?: number;
  pgRestartEveryMs?: number;
  restartPostgres?: () => Promise<void>;
  timeoutMs?: number;
  log?: (line: string) => void;
}

export interface ChaosResult extends FaultCounts {
  workflows: number;
  /** Statement timeouts recorded as failed attempts of the slow activity. */
  statementTimeouts: number;
  lost: number;
  duplicated: number;
  violations: string[];
}

interface Worker {
  port: number;
  proc: ChildProcess | null;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rand = (a: number, b: number) => a + Math.floor(Math.random() * (b - a + 1));

function startWorker(w: Worker, url: string, next: string): Promise<void> {
  const debugImport = process.env.CHAOS_WORKER_IMPORT ? ["--import", process.env.CHAOS_WORKER_IMPORT] : [];
  const proc = spawn(process.execPath, [...debugImport, "--import", "tsx", join(import.meta.dirname, "worker.ts")], {
    env: { ...process.env, PORT: String(w.port), DATABASE_URL: url, EDDA_SECRET: "chaos", CHAOS_NEXT_URL: next, EDDA_SERVICE_NAME: `chaos-${w.port}`, PGAPPNAME: WORKER_APP_NAME },
    stdio: ["ignore", "ignore", "pipe", "ipc"],
  });
  // Expected noise (dispatches to killed workers, connections terminated under a step); CHAOS_DEBUG=1 shows it.
  proc.stderr?.on("data", (d: Buffer) => void (process.env.CHAOS_DEBUG && process.stderr.write(`[${w.port}] ${d.toString()}`)));
  w.proc = proc;
  return new Promise((resolve, reject) => {
    proc.once("message", () => resolve());
    proc.once("exit", (code) => reject(new Error(`worker on ${w.port} exited early (${code})`)));
  });
}

/** Start a worker, retrying while it cannot come up (e.g. Postgres is restarting). */
async function startWorkerPersistently(w: Worker, url: string, next: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startWorker(w, url, next);
    } catch (err) {
      w.proc?.kill("SIGKILL");
      if (attempt >= 20) throw err;
      await pause(250);
    }
  }
}

/** Run a driver-side write until it lands (the server may be restarting); `done` recognises one that landed before its error. */
async function persist<T>(fn: () => Promise<T>, done: (err: unknown) => boolean = () => false): Promise<T | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (done(err)) return undefined;
      if (attempt >= 100) throw err;
      await pause(100);
    }
  }
}

const isUniqueViolation = (err: unknown) => {
  for (let e: unknown = err; typeof e === "object" && e !== null; e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: unknown }).code === "23505") return true;
  }
  return false;
};

async function startInstance(workers: Worker[], name: string, input: unknown, instanceId: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const w = workers[rand(0, workers.length - 1)]!;
    try {
      const r = await fetch(`http://127.0.0.1:${w.port}/workflows/${name}/instances`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input, instanceId }),
        signal: AbortSignal.timeout(5000),
      });
      if (r.status === 201 || r.status === 200) return;
      throw new Error(`HTTP ${r.status}`);
    } catch (err) {
      // a killed worker: the same instanceId again is idempotent
      if (attempt > 200) throw err;
      await pause(50);
    }
  }
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosResult> {
  const t0 = Date.now();
  const log = (line: string) => opts.log?.(`${line} (+${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  const n = {
    workers: opts.workers ?? 3,
    steps: opts.steps ?? 300,
    sagas: opts.sagas ?? 80,
    consumers: opts.consumers ?? 40,
    jobsPerConsumer: opts.jobsPerConsumer ?? 5,
    listeners: opts.listeners ?? 30,
    news: opts.news ?? 20,
    cancels: opts.cancels ?? 50,
    slow: opts.slow ?? 30,
  };
  const admin: Database = createPostgresJsDatabase({ url: opts.databaseUrl, max: 4 });
  const storage = createStorage(admin);
  await migrate(admin.db);
  for (const ddl of CHAOS_TABLES) await admin.db.execute(ddl);

  const ports = await Promise.all(Array.from({ length: n.workers }, () => freePort()));
  const workers: Worker[] = ports.map((port) => ({ port, proc: null }));
  const nextOf = (i: number) => `http://127.0.0.1:${ports[(i + 1) % ports.length]}`;
  await Promise.all(workers.map((w, i) => startWorker(w, opts.databaseUrl, nextOf(i))));
  log(`chaos: ${n.workers} workers up`);

  const faults = startFaults(
    {
      killWorker: {
        everyMs: opts.killEveryMs ?? [200, 600],
        kill: async () => {
          const i = rand(0, workers.length - 1);
          workers[i]!.proc?.kill("SIGKILL");
          await startWorkerPersistently(workers[i]!, opts.databaseUrl, nextOf(i));
        },
      },
      ...(opts.backendKillEveryMs !== null ? { backendKills: { everyMs: opts.backendKillEveryMs ?? [200, 500], admin } } : {}),
      ...(opts.restartPostgres && (opts.pgRestarts ?? 0) > 0
        ? { pgRestarts: { times: opts.pgRestarts!, everyMs: opts.pgRestartEveryMs ?? 8000, restart: opts.restartPostgres } }
        : {}),
    },
    log,
  );
  let stopped: FaultCounts | null = null;

  const violations: string[] = [];
  try {
    const starts: Promise<void>[] = [];
    for (let i = 0; i < n.steps; i++) starts.push(startInstance(workers, "chaos_steps", 3, `steps-${i}`));
    for (let i = 0; i < n.sagas; i++) starts.push(startInstance(workers, "chaos_saga", null, `saga-${i}`));
    for (let i = 0; i < n.consumers; i++) starts.push(startInstance(workers, "chaos_consumer", n.jobsPerConsumer, `consumer-${i}`));
    for (let i = 0; i < n.listeners; i++) starts.push(startInstance(workers, "chaos_listener", null, `listener-${i}`));
    for (let i = 0; i < n.cancels; i++) starts.push(startInstance(workers, "chaos_cancel", null, `cancel-${i}`));
    for (let i = 0; i < n.slow; i++) starts.push(startInstance(workers, "chaos_slow", i % 3, `slow-${i}`));
    await Promise.all(starts);
    log("chaos: all workflows started");

    // Messages go straight to storage (no wake-up call): delivery relies on the workers' sweepers.
    // Each with its own message id: a publish retried after its commit was acknowledged by nobody is refused, not doubled.
    const publish = (channel: string, messageId: string, data: unknown) =>
      persist(() => storage.publishMessage({ channel, messageId, data: toPayload(data) }), isUniqueViolation);
    const jobIds: string[] = [];
    for (let i = 0; i < n.consumers * n.jobsPerConsumer; i++) {
      jobIds.push(`job-${i}`);
      await publish("chaos_jobs", `job-${i}`, { job: i });
    }
    // Listeners must be subscribed before the news starts, so each must see all of it.
    await waitUntil(async () => (await count(admin, sql`SELECT count(*)::int AS n FROM channel_subscriptions WHERE channel = 'chaos_news'`)) === n.listeners, opts.timeoutMs ?? 120_000, "listeners subscribed", admin);
    for (let s = 1; s <= n.news; s++) await publish("chaos_news", `news-${s}`, s);
    await publish("chaos_news", "news-stop", "STOP");
    log("chaos: jobs and news published");

    // Cancel the sleepers once they are asleep (retrying through kills).
    await waitUntil(async () => (await count(admin, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'chaos_cancel' AND status = 'waiting_for_timer'`)) === n.cancels, opts.timeoutMs ?? 120_000, "sleepers asleep", admin);
    for (let i = 0; i < n.cancels; i++) await persist(() => storage.cancelInstance(`cancel-${i}`, "chaos"));
    const workflows = n.steps + n.sagas + n.consumers + n.listeners + n.cancels + n.slow;

    log("chaos: sleepers cancelled");
    await waitUntil(
      async () => (await count(admin, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status IN ('completed','failed','cancelled')`)) === workflows,
      opts.timeoutMs ?? 120_000,
      "all instances terminal",
      admin,
    ).catch((e: Error) => violations.push(e.message));
    log("chaos: all terminal");
    stopped = await faults.stop();
    await pause(500);

    const result = await verify(admin, n, jobIds, violations);
    return { workflows, ...stopped, ...result, violations };
  } finally {
    if (!stopped) await faults.stop();
    for (const w of workers) w.proc?.kill("SIGKILL");
    await admin.close();
  }
}

async function count(db: Database, q: ReturnType<typeof sql>): Promise<number> {
  return Number((await queryRows<{ n: number }>(db.db, q))[0]?.n ?? 0);
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string, db?: Database): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) {
      const states = db
        ? await queryRows<{ workflow_name: string; status: string; n: number }>(
            db.db,
            sql`SELECT workflow_name, status, count(*)::int AS n FROM workflow_instances GROUP BY 1, 2 ORDER BY 1, 2`,
          ).catch(() => [])
        : [];
      if (db && process.env.CHAOS_DEBUG) {
        console.error(
          await queryRows(db.db, sql`SELECT instance_id, status, current_activity_id, locked_by, lock_expires_at, updated_at, failure_count, failure_data, now() FROM workflow_instances WHERE status NOT IN ('completed','failed','cancelled') LIMIT 5`).catch((e: unknown) => e),
          await queryRows(db.db, sql`SELECT h.instance_id, h.activity_id, h.event_type, left(h.event_data, 300) AS data FROM workflow_history h JOIN workflow_instances i USING (instance_id) WHERE i.status NOT IN ('completed','failed','cancelled') ORDER BY h.id LIMIT 40`).catch((e: unknown) => e),
          await queryRows(db.db, sql`SELECT * FROM channel_subscriptions s WHERE instance_id IN (SELECT instance_id FROM workflow_instances WHERE status NOT IN ('completed','failed','cancelled')) LIMIT 10`).catch((e: unknown) => e),
          await queryRows(db.db, sql`SELECT (SELECT count(*) FROM channel_message_claims) AS claims, (SELECT count(*) FROM chaos_consumed) AS consumed, (SELECT count(*) FROM channel_messages WHERE channel = 'chaos_jobs') AS jobs`).catch((e: unknown) => e),
        );
      }
      throw new Error(`timed out waiting for: ${what}${states.length ? ` (${states.map((r) => `${r.workflow_name} ${r.status}: ${r.n}`).join(", ")})` : ""}`);
    }
    await pause(100);
  }
}

async function verify(
  db: Database,
  n: { steps: number; sagas: number; consumers: number; jobsPerConsumer: number; listeners: number; news: number; cancels: number; slow: number },
  jobIds: string[],
  violations: string[],
) {
  let lost = 0;
  let duplicated = 0;
  const expectStatus = async (workflow: string, status: string, expected: number) => {
    const got = await count(db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = ${workflow} AND status = ${status}`);
    if (got !== expected) {
      violations.push(`${workflow}: ${got}/${expected} ${status}`);
      lost += Math.max(0, expected - got);
    }
  };
  await expectStatus("chaos_steps", "completed", n.steps);
  await expectStatus("chaos_saga", "failed", n.sagas);
  await expectStatus("chaos_consumer", "completed", n.consumers);
  await expectStatus("chaos_listener", "completed", n.listeners);
  await expectStatus("chaos_cancel", "cancelled", n.cancels);
  await expectStatus("chaos_slow", "completed", n.slow);

  // each slow activity succeeded on the attempt after its planned statement timeouts (a dropped connection may add attempts)
  const slow = await queryRows<{ instance_id: string; output_data: string | null }>(db.db, sql`SELECT instance_id, output_data FROM workflow_instances WHERE workflow_name = 'chaos_slow'`);
  for (const s of slow) {
    const planned = Number(s.instance_id.slice("slow-".length)) % 3;
    const attempts = s.output_data ? (JSON.parse(s.output_data) as { attempts: number }).attempts : 0;
    if (attempts < planned + 1) violations.push(`${s.instance_id}: succeeded on attempt ${attempts}, before its ${planned} statement timeouts`);
  }
  const statementTimeouts = await count(
    db,
    sql`SELECT count(*)::int AS n FROM workflow_history h JOIN workflow_instances i USING (instance_id)
        WHERE i.workflow_name = 'chaos_slow' AND h.event_type = 'ActivityAttemptFailed' AND h.event_data LIKE '%statement timeout%'`,
  );
  const plannedTimeouts = Array.from({ length: n.slow }, (_, i) => i % 3).reduce((a, b) => a + b, 0);
  if (statementTimeouts < plannedTimeouts) violations.push(`statement timeouts recorded: ${statementTimeouts}, planned ${plannedTimeouts}`);

  // every transactional row exactly once
  const rows = await queryRows<{ instance_id: string; tag: string; c: number }>(db.db, sql`SELECT instance_id, tag, count(*)::int AS c FROM chaos_rows GROUP BY 1, 2`);
  const expectedRows = n.steps * 3 + (n.sagas + n.cancels + n.slow) * 2;
  for (const r of rows) if (Number(r.c) > 1) duplicated += Number(r.c) - 1;
  if (rows.length < expectedRows) lost += expectedRows - rows.length;
  if (rows.length !== expectedRows) violations.push(`chaos_rows: ${rows.length} distinct rows, expected ${expectedRows}`);

  // each competing message consumed exactly once
  const consumed = await queryRows<{ message_id: string; c: number }>(db.db, sql`SELECT message_id, count(*)::int AS c FROM chaos_consumed GROUP BY 1`);
  const seen = new Map(consumed.map((r) => [r.message_id, Number(r.c)]));
  for (const id of jobIds) {
    const c = seen.get(id) ?? 0;
    if (c === 0) lost++;
    if (c > 1) duplicated += c - 1;
  }
  if (consumed.length !== jobIds.length) violations.push(`chaos_consumed: ${consumed.length} messages, expected ${jobIds.length}`);

  // broadcast: every listener got 1..news, in order
  const outs = await queryRows<{ output_data: string | null }>(db.db, sql`SELECT output_data FROM workflow_instances WHERE workflow_name = 'chaos_listener'`);
  const want = JSON.stringify(Array.from({ length: n.news }, (_, i) => i + 1));
  const wrong = outs.filter((o) => o.output_data !== want).length;
  if (wrong) {
    violations.push(`${wrong} listeners did not get exactly 1..${n.news} in order`);
    lost += wrong;
  }

  const held = await count(db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE locked_by IS NOT NULL`);
  if (held) violations.push(`${held} leases still held`);
  if (duplicated) violations.push(`${duplicated} duplicated effects`);
  return { lost, duplicated, statementTimeouts };
}
