/**
 * Chaos driver: several real worker processes on one Postgres, a random one
 * SIGKILLed every few hundred milliseconds and restarted, their database
 * connections terminated, the Postgres server restarted (see faults.ts),
 * while a mix of workflows runs (transactional rows, sleeps, competing and
 * broadcast messages, saga failures, cancellations, statement timeouts inside
 * transactional activities, parents invoking children and cancelled mid-run,
 * matched event waits with lookback among strays, keyed concurrency). Then
 * every invariant is checked (verify.ts).
 *
 * Slowness is not loss: each wait fails only when nothing progressed for
 * `stallMs` (a machine under load takes longer; a stuck instance still fails).
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
import { count, heldParents, instanceCount, payment, verify, type Mix } from "./verify.ts";

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
  /** chaos_parent instances (odd ones cancelled mid-run) and the children each invokes. */
  parents?: number;
  childrenPerParent?: number;
  /** chaos_order instances, each waiting for its own matched payment event. */
  orders?: number;
  /** chaos_keyed instances over `keys` concurrency keys (limit KEYED_LIMIT each). */
  keyed?: number;
  keys?: number;
  /** SIGKILL a worker every [min, max] ms (null: never — with default leases a killed worker's lease holds for 300 s). */
  killEveryMs?: [number, number] | null;
  /** Workers run with the default lease (300 s), hand-off lease and sweep interval instead of the short chaos ones. */
  defaultLeases?: boolean;
  /** A violation when the last instance became terminal later than this after the last Postgres restart answered. */
  completeWithinSecondsOfRestart?: number;
  /** Terminate one worker connection every [min, max] ms (null: never). */
  backendKillEveryMs?: [number, number] | null;
  /** Restart Postgres this many times, `pgRestartEveryMs` apart (needs `restartPostgres`). */
  pgRestarts?: number;
  pgRestartEveryMs?: number;
  restartPostgres?: () => Promise<void>;
  /** A wait fails when it saw no progress (e.g. no instance became terminal) for this long (default 60 s × timeFactor). */
  stallMs?: number;
  /** Every time bound the driver asserts (stall limit, a request's timeout before it is retried) is multiplied by this (default 1; `--under-load` uses 3). */
  timeFactor?: number;
  log?: (line: string) => void;
}

export interface ChaosResult extends FaultCounts {
  workflows: number;
  /** Statement timeouts recorded as failed attempts of the slow activity. */
  statementTimeouts: number;
  lost: number;
  duplicated: number;
  /** The most chaos_keyed runs of one key seen overlapping (≤ KEYED_LIMIT). */
  maxKeyOverlap: number;
  /** From the last Postgres restart answering again to the last instance becoming terminal (null: no restart). */
  secondsAfterLastRestart: number | null;
  wallSeconds: number;
  violations: string[];
}

interface Worker {
  port: number;
  proc: ChildProcess | null;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rand = (a: number, b: number) => a + Math.floor(Math.random() * (b - a + 1));

let defaultLeases = false;
/** A driver request to a worker is abandoned and retried after this (5 s × timeFactor). */
let requestTimeoutMs = 5000;

function startWorker(w: Worker, url: string, next: string): Promise<void> {
  const debugImport = process.env.CHAOS_WORKER_IMPORT ? ["--import", process.env.CHAOS_WORKER_IMPORT] : [];
  const proc = spawn(process.execPath, [...debugImport, "--import", "tsx", join(import.meta.dirname, "worker.ts")], {
    env: { ...process.env, ...(defaultLeases ? { CHAOS_DEFAULT_LEASES: "1" } : {}), PORT: String(w.port), DATABASE_URL: url, EDDA_SECRET: "chaos", CHAOS_NEXT_URL: next, EDDA_SERVICE_NAME: `chaos-${w.port}`, PGAPPNAME: WORKER_APP_NAME },
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
        signal: AbortSignal.timeout(requestTimeoutMs),
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

/** A CloudEvent posted to a random worker's `POST /events` until one accepts it (a retry of an accepted one is deduplicated by its id). */
async function postEvent(workers: Worker[], event: { id: string; type: string; data: unknown }): Promise<void> {
  const body = JSON.stringify({ specversion: "1.0", source: "/chaos", ...event });
  for (let attempt = 0; ; attempt++) {
    const w = workers[rand(0, workers.length - 1)]!;
    try {
      const r = await fetch(`http://127.0.0.1:${w.port}/events`, { method: "POST", headers: { "content-type": "application/cloudevents+json" }, body, signal: AbortSignal.timeout(requestTimeoutMs) });
      if (r.status === 202) return;
      throw new Error(`HTTP ${r.status}`);
    } catch (err) {
      if (attempt > 200) throw err;
      await pause(50);
    }
  }
}

/** Cancel through a random worker's API (the engine cancels the children too); 409: already cancelled by an earlier try. */
async function cancelViaApi(workers: Worker[], instanceId: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const w = workers[rand(0, workers.length - 1)]!;
    try {
      const r = await fetch(`http://127.0.0.1:${w.port}/instances/${instanceId}/cancel`, { method: "POST", signal: AbortSignal.timeout(requestTimeoutMs) });
      if (r.status === 200 || r.status === 409) return;
      throw new Error(`HTTP ${r.status}`);
    } catch (err) {
      if (attempt > 200) throw err;
      await pause(50);
    }
  }
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosResult> {
  const t0 = Date.now();
  const log = (line: string) => opts.log?.(`${line} (+${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  const workerCount = opts.workers ?? 3;
  defaultLeases = opts.defaultLeases ?? false;
  const timeFactor = opts.timeFactor ?? 1;
  requestTimeoutMs = 5000 * timeFactor;
  const n: Mix = {
    steps: opts.steps ?? 300,
    sagas: opts.sagas ?? 80,
    consumers: opts.consumers ?? 40,
    jobsPerConsumer: opts.jobsPerConsumer ?? 5,
    listeners: opts.listeners ?? 30,
    news: opts.news ?? 20,
    cancels: opts.cancels ?? 50,
    slow: opts.slow ?? 30,
    parents: opts.parents ?? 40,
    childrenPerParent: opts.childrenPerParent ?? 3,
    orders: opts.orders ?? 60,
    keyed: opts.keyed ?? 40,
    keys: opts.keys ?? 4,
  };
  const stallMs = opts.stallMs ?? 60_000 * timeFactor;
  const admin: Database = createPostgresJsDatabase({ url: opts.databaseUrl, max: 4 });
  const storage = createStorage(admin);
  await migrate(admin.db);
  for (const ddl of CHAOS_TABLES) await admin.db.execute(ddl);

  const ports = await Promise.all(Array.from({ length: workerCount }, () => freePort()));
  const workers: Worker[] = ports.map((port) => ({ port, proc: null }));
  const nextOf = (i: number) => `http://127.0.0.1:${ports[(i + 1) % ports.length]}`;
  await Promise.all(workers.map((w, i) => startWorker(w, opts.databaseUrl, nextOf(i))));
  log(`chaos: ${workerCount} workers up`);

  const faults = startFaults(
    {
      ...(opts.killEveryMs !== null
        ? {
            killWorker: {
              everyMs: opts.killEveryMs ?? [200, 600],
              kill: async () => {
                const i = rand(0, workers.length - 1);
                workers[i]!.proc?.kill("SIGKILL");
                await startWorkerPersistently(workers[i]!, opts.databaseUrl, nextOf(i));
              },
            },
          }
        : {}),
      ...(opts.backendKillEveryMs !== null ? { backendKills: { everyMs: opts.backendKillEveryMs ?? [200, 500], admin } } : {}),
      ...(opts.restartPostgres && (opts.pgRestarts ?? 0) > 0
        ? { pgRestarts: { times: opts.pgRestarts!, everyMs: opts.pgRestartEveryMs ?? 8000, restart: opts.restartPostgres } }
        : {}),
    },
    log,
  );
  let stopped: FaultCounts | null = null;
  const statusCount = (workflow: string, statuses: string[]) =>
    count(admin, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = ${workflow} AND status IN (${sql.join(statuses.map((x) => sql`${x}`), sql`, `)})`);
  // Progress of the whole run: a step concluded (history grew) or an instance finished.
  const activity = () => count(admin, sql`SELECT (SELECT count(*) FROM workflow_history) + (SELECT count(*) FROM workflow_instances WHERE status IN ('completed','failed','cancelled')) AS n`);
  const progress = (what: string, measure: () => Promise<number>, target: number) => waitForProgress(measure, activity, target, stallMs, what, admin);

  const violations: string[] = [];
  try {
    const held = heldParents(n);
    const jobIds = Array.from({ length: n.consumers * n.jobsPerConsumer }, (_, i) => `job-${i}`);
    const workflows = instanceCount(n);
    await runMix().catch((e: Error) => violations.push(e.message));
    const terminalAt = Date.now();
    log(violations.length ? "chaos: stalled; checking what finished" : "chaos: all terminal");
    stopped = await faults.stop();
    const lastBack = faults.lastRestartAnsweredAt();
    const secondsAfterLastRestart = lastBack === null ? null : Math.max(0, Math.round((terminalAt - lastBack) / 100) / 10);
    const within = opts.completeWithinSecondsOfRestart;
    if (within !== undefined && secondsAfterLastRestart !== null && secondsAfterLastRestart > within) {
      violations.push(`the last instance became terminal ${secondsAfterLastRestart} s after the last Postgres restart answered (limit ${within} s)`);
    }
    await pause(500);

    const result = await verify(admin, n, jobIds, violations);
    return { workflows, ...stopped, ...result, secondsAfterLastRestart, wallSeconds: Math.round((Date.now() - t0) / 1000), violations };

    async function runMix() {
      const starts: Promise<void>[] = [];
      for (let i = 0; i < n.steps; i++) starts.push(startInstance(workers, "chaos_steps", 3, `steps-${i}`));
      for (let i = 0; i < n.sagas; i++) starts.push(startInstance(workers, "chaos_saga", null, `saga-${i}`));
      for (let i = 0; i < n.consumers; i++) starts.push(startInstance(workers, "chaos_consumer", n.jobsPerConsumer, `consumer-${i}`));
      for (let i = 0; i < n.listeners; i++) starts.push(startInstance(workers, "chaos_listener", null, `listener-${i}`));
      for (let i = 0; i < n.cancels; i++) starts.push(startInstance(workers, "chaos_cancel", null, `cancel-${i}`));
      for (let i = 0; i < n.slow; i++) starts.push(startInstance(workers, "chaos_slow", i % 3, `slow-${i}`));
      for (let i = 0; i < n.parents; i++) starts.push(startInstance(workers, "chaos_parent", { children: n.childrenPerParent, hold: i % 2 === 1 }, `parent-${i}`));
      for (let i = 0; i < n.orders; i++) starts.push(startInstance(workers, "chaos_order", `order-${i}`, `order-${i}`));
      for (let i = 0; i < n.keyed; i++) starts.push(startInstance(workers, "chaos_keyed", { key: `k${i % n.keys}` }, `keyed-${i}`));
      await Promise.all(starts);
      log("chaos: all workflows started");

      // Payments of the even orders while the orders still sleep (found by lookback), each after an event of
      // an order nobody waits for (must wake no one).
      const pay = (i: number) => postEvent(workers, { id: `pay-${i}`, type: "chaos.paid", data: payment(i) });
      const stray = (i: number) => postEvent(workers, { id: `stray-${i}`, type: "chaos.paid", data: { orderId: `nobody-${i}`, amount: -1 } });
      for (let i = 0; i < n.orders; i += 2) {
        await stray(i);
        await pay(i);
      }

      // Messages go straight to storage (no wake-up call): delivery relies on the workers' sweepers.
      // Each with its own message id: a publish retried after its commit was acknowledged by nobody is refused, not doubled.
      const publish = (channel: string, messageId: string, data: unknown) =>
        persist(() => storage.publishMessage({ channel, messageId, data: toPayload(data) }), isUniqueViolation);
      for (let i = 0; i < n.consumers * n.jobsPerConsumer; i++) {
        await publish("chaos_jobs", `job-${i}`, { job: i });
      }
      // Listeners must be subscribed before the news starts, so each must see all of it.
      await progress("listeners subscribed", () => count(admin, sql`SELECT count(*)::int AS n FROM channel_subscriptions WHERE channel = 'chaos_news'`), n.listeners);
      for (let s = 1; s <= n.news; s++) await publish("chaos_news", `news-${s}`, s);
      await publish("chaos_news", "news-stop", "STOP");
      log("chaos: jobs and news published");

      // The odd orders' payments once every order waits (or is done), again among strays.
      await progress("orders past their sleep", () => statusCount("chaos_order", ["waiting_for_message", "completed"]), n.orders);
      for (let i = 1; i < n.orders; i += 2) {
        await stray(i);
        await pay(i);
      }
      log("chaos: payments published");

      // Cancel the sleepers, and the held parents once all their children sleep (retrying through kills).
      await progress("sleepers asleep", () => statusCount("chaos_cancel", ["waiting_for_timer"]), n.cancels);
      for (let i = 0; i < n.cancels; i++) await persist(() => storage.cancelInstance(`cancel-${i}`, "chaos"));
      await progress("held children asleep", () => statusCount("chaos_child", ["waiting_for_timer"]), held * n.childrenPerParent);
      for (let i = 1; i < n.parents; i += 2) await cancelViaApi(workers, `parent-${i}`);
      log("chaos: sleepers and held parents cancelled");

      await progress("all instances terminal", () => count(admin, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status IN ('completed','failed','cancelled')`), workflows);
    }
  } finally {
    if (!stopped) await faults.stop();
    for (const w of workers) w.proc?.kill("SIGKILL");
    await admin.close();
  }
}

/**
 * Wait until `measure` reaches `target`. Slowness is not failure: the wait
 * fails only when neither the measure nor the run's `activity` (steps
 * concluded, instances finished) has grown for `stallMs`. A stuck instance
 * still fails it once everything else is done, and is reported with every
 * instance's state.
 */
async function waitForProgress(measure: () => Promise<number>, activity: () => Promise<number>, target: number, stallMs: number, what: string, db: Database): Promise<void> {
  let best = -1;
  let busiest = -1;
  let since = Date.now();
  let lastDebug = Date.now();
  for (;;) {
    const now = await measure().catch(() => null);
    if (now !== null && now >= target) return;
    const moved = await activity().catch(() => null);
    if ((now !== null && now > best) || (moved !== null && moved > busiest)) since = Date.now();
    if (now !== null) best = Math.max(best, now);
    if (moved !== null) busiest = Math.max(busiest, moved);
    if (Date.now() - since > stallMs) {
      const states = await queryRows<{ workflow_name: string; status: string; n: number }>(
        db.db,
        sql`SELECT workflow_name, status, count(*)::int AS n FROM workflow_instances GROUP BY 1, 2 ORDER BY 1, 2`,
      ).catch(() => []);
      if (process.env.CHAOS_DEBUG) await debugDump(db);
      throw new Error(
        `no progress for ${stallMs / 1000} s waiting for: ${what} (${best}/${target}; ${states.map((r) => `${r.workflow_name} ${r.status}: ${r.n}`).join(", ")})`,
      );
    }
    if (process.env.CHAOS_DEBUG && Date.now() - lastDebug > 10_000) {
      lastDebug = Date.now();
      console.error(`[driver] waiting for ${what}: ${best}/${target}`);
    }
    await pause(100);
  }
}

/** CHAOS_DEBUG: what the instances that are not terminal, and the workers' connections, are doing. */
async function debugDump(db: Database): Promise<void> {
  const q = (query: ReturnType<typeof sql>) => queryRows(db.db, query).catch((e: unknown) => e);
  const live = sql`(SELECT instance_id FROM workflow_instances WHERE status NOT IN ('completed','failed','cancelled'))`;
  console.error(
    await q(sql`SELECT instance_id, status, current_activity_id, locked_by, lock_expires_at, updated_at, failure_count, failure_data, now() FROM workflow_instances WHERE instance_id IN ${live} LIMIT 10`),
    await q(sql`SELECT instance_id, activity_id, event_type, left(event_data, 300) AS data FROM workflow_history WHERE instance_id IN ${live} ORDER BY id DESC LIMIT 40`),
    await q(sql`SELECT * FROM channel_subscriptions WHERE instance_id IN ${live} LIMIT 10`),
    await q(sql`SELECT application_name AS app, state, wait_event_type AS wtype, wait_event AS wait, now() - xact_start AS xact_age, left(query, 120) AS query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY xact_start NULLS LAST`),
    await q(sql`SELECT locktype, mode, granted, pid, objid FROM pg_locks WHERE NOT granted OR locktype = 'advisory'`),
  );
}
