/**
 * Engine behind a queue, fed the way Workers Queues feeds a consumer: the
 * real Workers adapter (`createWorker`, platform/cloudflare.ts) run in this
 * process, its `EDDA_QUEUE` binding an in-memory queue. Every follow-up is a
 * message; a consumer invocation takes up to 100 of them (the Queues maximum
 * batch), opens its own database client (5 connections, values inlined: a
 * client per invocation, as on Workers), runs the batch's steps side by side
 * and sends the batch's follow-ups in one `sendBatch`. `consumers`
 * invocations run at once (Queues scale consumers out; here two, for two
 * cores). Same workload as the local scenario: 200 concurrent 10-step
 * pipelines, each started by a request of its own (an invocation with its
 * own client, as on Workers).
 *
 * The Worker runs with EDDA_CONSUMER_CPU_MS=30000, the CPU limit of a Paid
 * plan's invocation by default: a batch chains its steps' follow-ups within
 * that budget (by estimate) instead of sending each as a message. Every
 * invocation connects anew (Workers cannot keep a socket across
 * invocations); what a connection costs is measured apart (a fresh client,
 * one statement, closed) and the connections opened are counted by the
 * server (pg_stat_database.sessions), so the report can say what the
 * connects take of a step.
 */
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { createWorker, type ExecutionContext, type MessageBatch, type QueueMessage } from "../../src/platform/cloudflare.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { cpuMeter, processCpuMs } from "../lib/cpu.ts";
import { completionTracker, migrateDatabase } from "../lib/engine.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { median, nowMs } from "../lib/stats.ts";
import { pipeline } from "../workflows.ts";

export interface EngineQueueOptions {
  workflows: number;
  steps: number;
  rounds: number;
  /** Consumer invocations at once. */
  consumers: number;
  /** EDDA_CONSUMER_CPU_MS of the Worker (default 30,000: a Paid plan's CPU limit per invocation; 0: no chain). */
  consumerCpuMs?: number;
}

export interface EngineQueueResult {
  queue_steps_per_s: number;
  queue_cpu_ms_per_step: number;
  queue_pg_cpu_ms_per_step: number | null;
  queue_messages_per_batch: number;
  /** Steps one consumer invocation ran (its messages and the steps it chained). */
  queue_steps_per_batch: number;
  /** Invocations (start requests and consumer batches) per step. */
  queue_invocations_per_step: number;
  /** Connections the server accepted per step (pg_stat_database.sessions). */
  queue_connections_per_step: number | null;
  /** A fresh per-request client's first statement, connect included, and its close: wall ms and this process's CPU ms. */
  queue_connect_ms: number;
  queue_connect_cpu_ms: number;
}

const MAX_BATCH = 100;
const TOKEN = "bench-token";

export async function runEngineQueue(pg: BenchPostgres, opts: EngineQueueOptions): Promise<EngineQueueResult> {
  const name = "bench_engine_queue";
  const url = await pg.createDatabase(name);
  await migrateDatabase(url);
  const tracker = completionTracker();
  const queued: unknown[] = [];
  const idle: (() => void)[] = [];
  const wakeAll = () => {
    for (const w of idle.splice(0)) w();
  };
  const push = (bodies: unknown[]) => {
    queued.push(...bodies);
    wakeAll();
  };
  const env = {
    DATABASE_URL: url,
    EDDA_SECRET: "bench-secret",
    EDDA_API_TOKEN: TOKEN,
    EDDA_CONSUMER_CPU_MS: String(opts.consumerCpuMs ?? 30_000),
    EDDA_QUEUE: {
      send: async (body: unknown) => push([body]),
      sendBatch: async (messages: Iterable<{ body: unknown }>) => push([...messages].map((m) => m.body)),
    },
  };
  const worker = createWorker({ workflows: [pipeline], hooks: tracker.hooks });
  let batches = 0;
  let messages = 0;
  let starts = 0;

  /** One consumer invocation: a batch of up to 100, its background work awaited (waitUntil). */
  const consume = async (bodies: unknown[]) => {
    const pending: Promise<unknown>[] = [];
    const ctx: ExecutionContext = { waitUntil: (p) => void pending.push(p), passThroughOnException() {} };
    const msgs: QueueMessage[] = bodies.map((body, i) => ({ id: String(i), body, attempts: 1, ack() {}, retry: () => push([body]) }));
    const batch: MessageBatch = { queue: "edda", messages: msgs };
    batches++;
    messages += msgs.length;
    await worker.queue(batch, env, ctx);
    for (let i = 0; i < pending.length; i++) await pending[i];
  };
  let running = true;
  const consumer = async () => {
    while (running) {
      if (queued.length === 0) {
        await new Promise<void>((resolve) => idle.push(resolve));
        continue;
      }
      await consume(queued.splice(0, MAX_BATCH));
    }
  };
  const loops = Array.from({ length: opts.consumers }, consumer);

  const start = async () => {
    starts++;
    const res = await worker.fetch(
      new Request("http://edda.bench/workflows/pipeline/instances", { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ input: { steps: opts.steps } }) }),
      env,
      { waitUntil: () => {}, passThroughOnException() {} },
    );
    if (res.status !== 201) throw new Error(`start → HTTP ${res.status} ${await res.text()}`);
  };
  const round = async (n: number) => {
    tracker.reset();
    const t0 = nowMs();
    for (let i = 0; i < n; i += 20) await Promise.all(Array.from({ length: Math.min(20, n - i) }, start));
    await tracker.waitFor(n, 300_000);
    return (nowMs() - t0) / 1000;
  };
  const admin = postgres(pg.adminUrl, { max: 1, onnotice: () => {} });
  const sessions = async () => {
    const [row] = await admin<{ n: string | null }[]>`SELECT sessions::text AS n FROM pg_stat_database WHERE datname = ${name}`;
    return row?.n == null ? null : Number(row.n);
  };
  try {
    await round(Math.min(20, opts.workflows)); // warm-up
    batches = 0;
    messages = 0;
    starts = 0;
    const sessions0 = await sessions().catch(() => null);
    const cpu = cpuMeter(name);
    let seconds = 0;
    for (let r = 0; r < opts.rounds; r++) seconds += await round(opts.workflows);
    const steps = opts.workflows * opts.steps * opts.rounds;
    const usage = cpu.perUnit(steps);
    const invocations = batches + starts;
    const stepsPerBatch = steps / Math.max(1, batches);
    const msgsPerBatch = batches ? messages / batches : 0;
    const connect = await connectCost(url);
    // Backends report their counters when they exit: the invocations' have closed by now (their clients end at waitUntil).
    await new Promise((r) => setTimeout(r, 600));
    const sessions1 = sessions0 === null ? null : await sessions().catch(() => null);
    return {
      queue_steps_per_s: steps / seconds,
      queue_cpu_ms_per_step: usage.node_ms,
      queue_pg_cpu_ms_per_step: usage.pg_ms,
      queue_messages_per_batch: msgsPerBatch,
      queue_steps_per_batch: stepsPerBatch,
      queue_invocations_per_step: invocations / steps,
      queue_connections_per_step: sessions0 === null || sessions1 === null ? null : (sessions1 - sessions0 - connect.samples) / steps,
      queue_connect_ms: connect.wallMs ?? 0,
      queue_connect_cpu_ms: connect.cpuMs ?? 0,
    };
  } finally {
    await admin.end({ timeout: 5 }).catch(() => undefined);
    running = false;
    wakeAll();
    await Promise.all(loops);
  }
}

/** A per-request client as the Worker opens one (postgres.js, unnamed statements): connect, one statement, close; medians of 30. */
async function connectCost(url: string): Promise<{ wallMs: number | null; cpuMs: number | null; samples: number }> {
  const samples = 30;
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t0 = nowMs();
    const c0 = processCpuMs();
    const db = createPostgresJsDatabase({ url, max: 5, prepare: false });
    await db.db.execute(sql`SELECT 1`);
    await db.close();
    wall.push(nowMs() - t0);
    cpu.push(processCpuMs() - c0);
  }
  return { wallMs: median(wall), cpuMs: median(cpu), samples };
}
