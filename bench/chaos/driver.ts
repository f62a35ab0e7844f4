/**
 * Chaos driver: several real worker processes on one Postgres, a random one
 * SIGKILLed every few hundred milliseconds and restarted, while a mix of
 * workflows runs (transactional rows, sleeps, competing and broadcast
 * messages, saga failures, cancellations). Then every invariant is checked:
 * each instance terminal with the outcome its input implies, each
 * transactional row exactly once, each competing message consumed exactly
 * once, broadcast listeners complete and in order, no lease left held.
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
  killEveryMs?: [number, number];
  timeoutMs?: number;
  log?: (line: string) => void;
}

export interface ChaosResult {
  workflows: number;
  kills: number;
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
  const proc = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "worker.ts")], {
    env: { ...process.env, PORT: String(w.port), DATABASE_URL: url, EDDA_SECRET: "chaos", CHAOS_NEXT_URL: next, EDDA_SERVICE_NAME: `chaos-${w.port}` },
    stdio: ["ignore", "ignore", "pipe", "ipc"],
  });
  proc.stderr?.on("data", () => {}); // expected noise: dispatches to killed workers fail
  w.proc = proc;
  return new Promise((resolve, reject) => {
    proc.once("message", () => resolve());
    proc.once("exit", (code) => reject(new Error(`worker on ${w.port} exited early (${code})`)));
  });
}

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
  const log = opts.log ?? (() => {});
  const n = {
    workers: opts.workers ?? 3,
    steps: opts.steps ?? 300,
    sagas: opts.sagas ?? 80,
    consumers: opts.consumers ?? 40,
    jobsPerConsumer: opts.jobsPerConsumer ?? 5,
    listeners: opts.listeners ?? 30,
    news: opts.news ?? 20,
    cancels: opts.cancels ?? 50,
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

  let kills = 0;
  let killing = true;
  const killer = (async () => {
    const [lo, hi] = opts.killEveryMs ?? [200, 600];
    while (killing) {
      await pause(rand(lo, hi));
      if (!killing) break;
      const i = rand(0, workers.length - 1);
      const w = workers[i]!;
      w.proc?.kill("SIGKILL");
      kills++;
      await startWorker(w, opts.databaseUrl, nextOf(i)).catch(() => undefined);
    }
  })();

  const violations: string[] = [];
  try {
    const starts: Promise<void>[] = [];
    for (let i = 0; i < n.steps; i++) starts.push(startInstance(workers, "chaos_steps", 3, `steps-${i}`));
    for (let i = 0; i < n.sagas; i++) starts.push(startInstance(workers, "chaos_saga", null, `saga-${i}`));
    for (let i = 0; i < n.consumers; i++) starts.push(startInstance(workers, "chaos_consumer", n.jobsPerConsumer, `consumer-${i}`));
    for (let i = 0; i < n.listeners; i++) starts.push(startInstance(workers, "chaos_listener", null, `listener-${i}`));
    for (let i = 0; i < n.cancels; i++) starts.push(startInstance(workers, "chaos_cancel", null, `cancel-${i}`));
    await Promise.all(starts);
    log("chaos: all workflows started");

    // Messages go straight to storage (no wake-up call): delivery relies on the workers' sweepers.
    const jobIds: string[] = [];
    for (let i = 0; i < n.consumers * n.jobsPerConsumer; i++) {
      jobIds.push((await storage.publishMessage({ channel: "chaos_jobs", data: toPayload({ job: i }) })).messageId);
    }
    // Listeners must be subscribed before the news starts, so each must see all of it.
    await waitUntil(async () => (await count(admin, sql`SELECT count(*)::int AS n FROM channel_subscriptions WHERE channel = 'chaos_news'`)) === n.listeners, opts.timeoutMs ?? 120_000, "listeners subscribed");
    for (let s = 1; s <= n.news; s++) await storage.publishMessage({ channel: "chaos_news", data: toPayload(s) });
    await storage.publishMessage({ channel: "chaos_news", data: toPayload("STOP") });

    // Cancel the sleepers once they are asleep (retrying through kills).
    await waitUntil(async () => (await count(admin, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'chaos_cancel' AND status = 'waiting_for_timer'`)) === n.cancels, opts.timeoutMs ?? 120_000, "sleepers asleep");
    for (let i = 0; i < n.cancels; i++) await storage.cancelInstance(`cancel-${i}`, "chaos");
    const workflows = n.steps + n.sagas + n.consumers + n.listeners + n.cancels;

    await waitUntil(
      async () => (await count(admin, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status IN ('completed','failed','cancelled')`)) === workflows,
      opts.timeoutMs ?? 120_000,
      "all instances terminal",
    ).catch((e: Error) => violations.push(e.message));
    killing = false;
    await killer;
    await pause(500);

    const result = await verify(admin, n, jobIds, violations);
    return { workflows, kills, ...result, violations };
  } finally {
    killing = false;
    for (const w of workers) w.proc?.kill("SIGKILL");
    await admin.close();
  }
}

async function count(db: Database, q: ReturnType<typeof sql>): Promise<number> {
  return Number((await queryRows<{ n: number }>(db.db, q))[0]?.n ?? 0);
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await pause(100);
  }
}

async function verify(db: Database, n: { steps: number; sagas: number; consumers: number; jobsPerConsumer: number; listeners: number; news: number; cancels: number }, jobIds: string[], violations: string[]) {
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

  // every transactional row exactly once
  const rows = await queryRows<{ instance_id: string; tag: string; c: number }>(db.db, sql`SELECT instance_id, tag, count(*)::int AS c FROM chaos_rows GROUP BY 1, 2`);
  const expectedRows = n.steps * 3 + (n.sagas + n.cancels) * 2;
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
  return { lost, duplicated };
}
