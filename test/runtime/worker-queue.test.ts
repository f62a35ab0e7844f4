// Follow-ups on Cloudflare Queues in real workerd (`wrangler dev`, local
// queue from wrangler.toml): every step of a 200-step pipeline runs in a
// top-level queue() invocation (no follow-up ever arrives as a nested fetch);
// a 5 s sleep fires within about a second of due with no cron run; killing
// wrangler mid-pipeline loses nothing — after a restart the cron sweep
// resumes the instance and every step ran exactly once in the history.
// Compose and control on the same wrangler (compose-flows.ts): children,
// matched events, a concurrency key, timeouts by the queue's delayed
// wake-up, and one cron sweep that times out an orphaned run and starts a
// schedule tick. Subrequests are counted per invocation where they leave the
// Worker (wrangler dev does not enforce the limit) and held against it.
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import { queryRows } from "../../src/storage/database.ts";
import { QUEUE_STEP_CPU_MS, WORKERS_FREE_CONSUMER_CPU_MS, WORKERS_SUBREQUEST_BUDGET, type InvocationCounts as Counts } from "../../src/platform/cloudflare.ts";
import { checkSweepWork, composeFlows, prepareSweepWork, STRIPE_WEBHOOK_SECRET } from "./compose-flows.ts";
import { api, waitForStatus } from "./processes.ts";
import { fireCron, startWorkerWith } from "./worker-setup.ts";

/** Workers Free: 50 subrequests per invocation; the database pool holds up to 5 of them (TCP connections). */
const FREE_PLAN_SUBREQUESTS = 50;
const POOL_CONNECTIONS = 5;

// Short leases: a step killed with wrangler is resumable 3 s later rather than 30 s / 5 min.
const w = startWorkerWith(
  "workerd_queue",
  () => ({ EDDA_SECRET: "queue-secret", EDDA_WEBHOOK_STRIPE_SECRET: STRIPE_WEBHOOK_SECRET, EDDA_LEASE_SECONDS: "3", EDDA_HANDOFF_LEASE_SECONDS: "3" }),
  { stopSignal: "SIGKILL" },
);

const counts = async () => (await api<Counts>(w.worker.url, "GET", "/_edda/invocations")).body;
const start = async (name: string, input: unknown, instanceId: string) => {
  const r = await api<{ instanceId: string }>(w.worker.url, "POST", `/workflows/${name}/instances`, { input, instanceId });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.instanceId;
};
const completedSteps = async (id: string) =>
  queryRows<{ activity_id: string }>(w.db.db, sql`SELECT activity_id FROM workflow_history WHERE instance_id = ${id} AND event_type = 'ActivityCompleted' ORDER BY id`);

it("a 200-step pipeline completes with every step run by a top-level queue() invocation, chained within the consumer's CPU budget", { timeout: 120_000 }, async () => {
  const before = await counts();
  const id = await start("pipeline", { steps: 200 }, "queue-pipe-200");
  const done = await waitForStatus(w.worker.url, id, ["completed", "failed"], 110_000);
  expect(done.output).toEqual({ completed: 200 });
  const after = await counts();
  expect(after.fetchFollowUps - before.fetchFollowUps).toBe(0); // no nested follow-up fetch, ever
  // A step per activity, each a message or chained in the invocation of the step before it (the default budget: Free's 10 ms).
  const perInvocation = WORKERS_FREE_CONSUMER_CPU_MS / QUEUE_STEP_CPU_MS;
  const messages = after.queueMessages - before.queueMessages;
  expect(messages + after.queueChainedSteps - before.queueChainedSteps).toBeGreaterThanOrEqual(200);
  expect(messages).toBeGreaterThanOrEqual(200 / perInvocation);
  expect(after.queueChainedSteps - before.queueChainedSteps).toBeGreaterThan(0);
  expect(after.maxQueueBatchSteps).toBeLessThanOrEqual(perInvocation);
  expect(after.scheduled).toBe(before.scheduled);
  expect(new Set((await completedSteps(id)).map((r) => r.activity_id)).size).toBe(200);
});

const scheduled = () => fireCron(w.worker.url);
it("one cron sweep times out a run whose process died before its deadline wake-up and starts a due schedule tick, once", { timeout: 60_000 }, async () => {
  const { orphan } = await prepareSweepWork(w.databaseUrl, w.worker.url, w.db, "wq");
  const [row] = await queryRows<{ wait: number }>(w.db.db, sql`SELECT extract(epoch FROM deadline_at - now())::float8 AS wait FROM workflow_instances WHERE instance_id = ${orphan}`);
  await new Promise((r) => setTimeout(r, Math.max(0, Number(row!.wait) * 1000) + 300));
  // Past its deadline, nothing has ended it: no wake-up was ever scheduled for it.
  expect((await api<{ status: string }>(w.worker.url, "GET", `/instances/${orphan}`)).body.status).toBe("waiting_for_timer");
  const daily = sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'daily_report'`;
  expect((await queryRows<{ n: number }>(w.db.db, daily))[0]!.n).toBe(0);
  const before = await counts();
  await scheduled();
  await checkSweepWork(w.worker.url, w.db, orphan);
  await scheduled(); // a second sweep starts no second instance for the tick
  await checkSweepWork(w.worker.url, w.db, orphan);
  expect((await counts()).scheduled).toBe(before.scheduled + 2);
});

composeFlows({
  prefix: "wq",
  base: () => w.worker.url,
  db: () => w.db,
  async transport() {
    const before = await counts();
    return async () => {
      const after = await counts();
      expect(after.scheduled).toBe(before.scheduled); // carried by the queue, not the cron
      expect(after.fetchFollowUps).toBe(0); // no nested follow-up fetch
      expect(after.queueMessages).toBeGreaterThan(before.queueMessages);
    };
  },
});

it("subrequests per invocation stay within the documented limit: a consumer batch sends its follow-ups in one sendBatch", async () => {
  const { maxSubrequests } = await counts();
  // Every flow above ran; a batch of up to 100 messages made one send, however many of its steps dispatched.
  expect(maxSubrequests.queueBatch).toBe(1);
  for (const n of Object.values(maxSubrequests)) expect(n).toBeLessThanOrEqual(Math.min(WORKERS_SUBREQUEST_BUDGET, FREE_PLAN_SUBREQUESTS - POOL_CONNECTIONS));
  expect(maxSubrequests.request).toBeGreaterThan(0);
  expect(maxSubrequests.scheduled).toBeGreaterThan(0);
});

it("a 5 s reminder fires within about a second of due, with no cron run", { timeout: 30_000 }, async () => {
  const before = await counts();
  const id = await start("reminder", { seconds: 5 }, "queue-reminder-5");
  await waitForStatus(w.worker.url, id, ["waiting_for_timer"], 10_000);
  const [timer] = await queryRows<{ due: string }>(w.db.db, sql`SELECT extract(epoch FROM expires_at)::float8 AS due FROM workflow_timer_subscriptions WHERE instance_id = ${id}`);
  const done = await waitForStatus(w.worker.url, id, ["completed"], 20_000);
  expect(done.output).toEqual({ reminded: true });
  const [fired] = await queryRows<{ at: string }>(w.db.db, sql`SELECT extract(epoch FROM created_at)::float8 AS at FROM workflow_history WHERE instance_id = ${id} AND event_type = 'TimerExpired'`);
  const lateBy = Number(fired!.at) - Number(timer!.due);
  expect(lateBy).toBeGreaterThanOrEqual(0);
  expect(lateBy).toBeLessThan(1.5);
  expect((await counts()).scheduled).toBe(before.scheduled);
});

it("killing wrangler dev mid-pipeline loses nothing: after a restart the sweep resumes it and each step ran once", { timeout: 150_000 }, async () => {
  // Long enough to be mid-run when killed: consumer invocations chain up to 20 of its steps each.
  const id = await start("pipeline", { steps: 400 }, "queue-pipe-killed");
  const deadline = Date.now() + 60_000;
  while ((await completedSteps(id)).length < 20) {
    if (Date.now() > deadline) throw new Error(`pipeline did not progress:\n${w.worker.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await w.worker.stop("SIGKILL");
  const atKill = (await completedSteps(id)).length;
  expect(atKill).toBeLessThan(400);

  await w.restart();
  // The local queue died with the process; the database did not. Once the killed step's lease expires, the cron sweep resumes.
  await new Promise((r) => setTimeout(r, 3500));
  await scheduled();
  const done = await waitForStatus(w.worker.url, id, ["completed", "failed"], 90_000);
  expect(done.output).toEqual({ completed: 400 });
  const steps = (await completedSteps(id)).map((r) => r.activity_id);
  expect(steps).toHaveLength(400);
  expect(new Set(steps).size).toBe(400);
  expect((await counts()).fetchFollowUps).toBe(0);
});
