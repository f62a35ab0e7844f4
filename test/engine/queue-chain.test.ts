// A Queue consumer batch chains (platform/cloudflare.ts queue(), engine/queue-dispatcher.ts consumeBatch):
// the Workers adapter run in this process on real Postgres, its EDDA_QUEUE binding a queue held here
// that hands the consumer batches of up to 100 the way Queues does (and can hand a message twice, as
// at-least-once delivery may). A step follow-up of the batch's own steps runs in the same invocation
// while the consumer's CPU budget (EDDA_CONSUMER_CPU_MS, by the per-step estimate) allows, and the rest
// leaves in the batch's one sendBatch; with the budget at 0 every step is a message, as before. Every
// step runs exactly once however the messages are delivered. The same adapter in real workerd with
// wrangler's local queue: test/runtime/worker-queue.test.ts.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createWorker, QUEUE_STEP_CPU_MS, type InvocationCounts, type MessageBatch, type QueueMessage } from "../../src/platform/cloudflare.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { freshPostgres } from "../support/engine.ts";

const TOKEN = "chain-token";
let url: string;
let db: Database;

beforeAll(async () => {
  const pg = await freshPostgres("queue_chain");
  url = pg.url;
  db = pg.open();
});
afterAll(async () => {
  await db?.close();
});

/** A Worker and the queue it sends to; `drain` runs consumer batches until the queue is empty. */
function harness(vars: Record<string, string>) {
  const queued: { body: unknown; delaySeconds?: number }[] = [];
  const sends: number[] = [];
  const env = {
    DATABASE_URL: url,
    EDDA_SECRET: "chain-secret",
    EDDA_API_TOKEN: TOKEN,
    ...vars,
    EDDA_QUEUE: {
      send: async (body: unknown, o?: { delaySeconds?: number }) => {
        sends.push(1);
        queued.push({ body, ...(o?.delaySeconds ? { delaySeconds: o.delaySeconds } : {}) });
      },
      sendBatch: async (messages: Iterable<{ body: unknown; delaySeconds?: number }>) => {
        const list = [...messages];
        sends.push(list.length);
        queued.push(...list);
      },
    },
  };
  const worker = createWorker({ workflows: [pipeline] });
  const invoke = async (bodies: unknown[]) => {
    const pending: Promise<unknown>[] = [];
    const ctx = { waitUntil: (p: Promise<unknown>) => void pending.push(p), passThroughOnException() {} };
    const acked: boolean[] = bodies.map(() => false);
    const messages: QueueMessage[] = bodies.map((body, i) => ({ id: String(i), body, attempts: 1, ack: () => void (acked[i] = true), retry: () => void queued.push({ body }) }));
    const batch: MessageBatch = { queue: "edda", messages };
    await worker.queue(batch, env, ctx);
    for (let i = 0; i < pending.length; i++) await pending[i];
    return acked;
  };
  return {
    queued,
    sends,
    invoke,
    async start(steps: number, instanceId: string) {
      const pending: Promise<unknown>[] = [];
      const res = await worker.fetch(
        new Request("http://edda.test/workflows/pipeline/instances", { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ input: { steps }, instanceId }) }),
        env,
        { waitUntil: (p) => void pending.push(p), passThroughOnException() {} },
      );
      expect(res.status).toBe(201);
      for (let i = 0; i < pending.length; i++) await pending[i];
    },
    /** Consumer batches of up to 100 until nothing is queued; returns how many ran. */
    async drain(max = 1_000) {
      let batches = 0;
      while (queued.length) {
        if (++batches > max) throw new Error("the queue never drained");
        await invoke(queued.splice(0, 100).map((m) => m.body));
      }
      return batches;
    },
    async counts(): Promise<InvocationCounts> {
      const res = await worker.fetch(new Request("http://edda.test/_edda/invocations", { headers: { authorization: `Bearer ${TOKEN}` } }), env, { waitUntil: () => {}, passThroughOnException() {} });
      return (await res.json()) as InvocationCounts;
    },
  };
}

const completed = async (id: string) =>
  (await queryRows<{ activity_id: string }>(db.db, sql`SELECT activity_id FROM workflow_history WHERE instance_id = ${id} AND event_type = 'ActivityCompleted'`)).map((r) => r.activity_id);
const status = async (id: string) => (await queryRows<{ status: string }>(db.db, sql`SELECT status FROM workflow_instances WHERE instance_id = ${id}`))[0]?.status;

it("a batch chains its steps' follow-ups: a 40-step pipeline runs in one consumer invocation, one message, each step once", async () => {
  const h = harness({ EDDA_CONSUMER_CPU_MS: "30000" });
  await h.start(40, "chain-one");
  expect(h.queued).toHaveLength(1); // the start's first step
  const batches = await h.drain();
  expect(batches).toBe(1);
  expect(await status("chain-one")).toBe("completed");
  const steps = await completed("chain-one");
  expect(steps).toHaveLength(40);
  expect(new Set(steps).size).toBe(40);
  const c = await h.counts();
  expect(c.queueMessages).toBe(1);
  expect(c.queueChainedSteps).toBe(39); // a step per activity (the last one completes the run): the first the message's, 39 chained
  expect(c.maxQueueBatchSteps).toBe(40);
  expect(c.maxSubrequests.queueBatch).toBe(0); // nothing left to send
});

it("the chain stops at the CPU budget by estimate: each invocation runs at most budget / estimate steps, the rest leaves in one sendBatch", async () => {
  const perInvocation = 5;
  const h = harness({ EDDA_CONSUMER_CPU_MS: String(perInvocation * QUEUE_STEP_CPU_MS) });
  const ids = Array.from({ length: 3 }, (_, i) => `chain-bound-${i}`);
  for (const id of ids) await h.start(12, id);
  await h.drain();
  const c = await h.counts();
  expect(c.maxQueueBatchSteps).toBe(perInvocation);
  // Three pipelines of 12 steps: 36 work items, at most 5 per invocation.
  expect(c.queueMessages + c.queueChainedSteps).toBe(36);
  expect(c.queueBatches).toBeGreaterThanOrEqual(Math.ceil(36 / perInvocation));
  expect(c.maxSubrequests.queueBatch).toBe(1);
  for (const id of ids) {
    expect(await status(id)).toBe("completed");
    const steps = await completed(id);
    expect(steps).toHaveLength(12);
    expect(new Set(steps).size).toBe(12);
  }
});

it("EDDA_CONSUMER_CPU_MS=0: no chain, every step is a message of its own", async () => {
  const h = harness({ EDDA_CONSUMER_CPU_MS: "0" });
  await h.start(6, "chain-off");
  await h.drain();
  const c = await h.counts();
  expect(c.queueChainedSteps).toBe(0);
  expect(c.queueMessages).toBe(6);
  expect(c.maxQueueBatchSteps).toBe(1);
  expect(await completed("chain-off")).toHaveLength(6);
});

it("every message delivered twice, batches split apart and run at once: each step still runs once and every pipeline completes", async () => {
  const h = harness({ EDDA_CONSUMER_CPU_MS: String(8 * QUEUE_STEP_CPU_MS) });
  const ids = Array.from({ length: 20 }, (_, i) => `chain-dup-${i}`);
  for (const id of ids) await h.start(15, id);
  let rounds = 0;
  while (h.queued.length) {
    if (++rounds > 500) throw new Error("the queue never drained");
    const bodies = h.queued.splice(0).map((m) => m.body);
    // At-least-once delivery: the same message in two batches that run at the same time, and twice in one of them.
    const doubled = [...bodies, ...bodies];
    const half = Math.ceil(doubled.length / 2);
    await Promise.all([h.invoke([...doubled.slice(0, half), bodies[0]]), h.invoke(doubled.slice(half))]);
  }
  for (const id of ids) {
    expect(await status(id)).toBe("completed");
    const steps = await completed(id);
    expect(steps).toHaveLength(15);
    expect(new Set(steps).size).toBe(15);
  }
  expect((await h.counts()).maxQueueBatchSteps).toBeGreaterThan(1);
}, 60_000);

it("start requests on one env share one app, each on a client of its own, closed after it: 30 starts leave no connection behind", async () => {
  const h = harness({ EDDA_CONSUMER_CPU_MS: "0" });
  const open = async () => (await queryRows<{ n: number }>(db.db, sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`))[0]!.n;
  const before = await open();
  // A body without content-length: the body limit then reads it into a new request (the client opened under it used to be left open).
  for (let i = 0; i < 30; i++) await h.start(1, `chain-conn-${i}`);
  await new Promise((r) => setTimeout(r, 200));
  expect(await open()).toBeLessThanOrEqual(before);
  await h.drain();
  for (let i = 0; i < 30; i++) expect(await status(`chain-conn-${i}`)).toBe("completed");
});
