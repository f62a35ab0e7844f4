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
 * pipelines.
 */
import { createWorker, type ExecutionContext, type MessageBatch, type QueueMessage } from "../../src/platform/cloudflare.ts";
import { cpuMeter } from "../lib/cpu.ts";
import { completionTracker, migrateDatabase } from "../lib/engine.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { nowMs } from "../lib/stats.ts";
import { pipeline } from "../workflows.ts";

export interface EngineQueueOptions {
  workflows: number;
  steps: number;
  rounds: number;
  /** Consumer invocations at once. */
  consumers: number;
}

export interface EngineQueueResult {
  queue_steps_per_s: number;
  queue_cpu_ms_per_step: number;
  queue_pg_cpu_ms_per_step: number | null;
  queue_messages_per_batch: number;
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
    EDDA_QUEUE: {
      send: async (body: unknown) => push([body]),
      sendBatch: async (messages: Iterable<{ body: unknown }>) => push([...messages].map((m) => m.body)),
    },
  };
  const worker = createWorker({ workflows: [pipeline], hooks: tracker.hooks });
  let batches = 0;
  let messages = 0;

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
  try {
    await round(Math.min(20, opts.workflows)); // warm-up
    batches = 0;
    messages = 0;
    const cpu = cpuMeter(name);
    let seconds = 0;
    for (let r = 0; r < opts.rounds; r++) seconds += await round(opts.workflows);
    const steps = opts.workflows * opts.steps * opts.rounds;
    const usage = cpu.perUnit(steps);
    return { queue_steps_per_s: steps / seconds, queue_cpu_ms_per_step: usage.node_ms, queue_pg_cpu_ms_per_step: usage.pg_ms, queue_messages_per_batch: batches ? messages / batches : 0 };
  } finally {
    running = false;
    wakeAll();
    await Promise.all(loops);
  }
}
