// The sweeper on real Postgres: every task of SPEC §4.5, its system locks, its
// budget, and two sweeps racing on separate connections over 2,000 expired
// timers — every instance resumed exactly once, nothing fired twice or lost.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, sleep, workflow } from "../../src/index.ts";
import type { Dispatcher, StepRequest } from "../../src/engine/dispatcher.ts";
import { Engine } from "../../src/engine/engine.ts";
import type { SweepReport } from "../../src/engine/sweeper.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import { toPayload } from "../../src/core/serialization.ts";
import { freshDatabase } from "../support/db.ts";

/** Records what the sweeper dispatches; the test runs the steps itself. */
class RecordingDispatcher implements Dispatcher {
  readonly requests: StepRequest[] = [];
  attach(): void {}
  dispatch(req: StepRequest): void {
    this.requests.push(req);
  }
}

const markWoken = activity("sw_mark_woken", async (ctx) => {
  await ctx.tx.execute(sql`INSERT INTO sw_woken (instance_id) VALUES (${ctx.instanceId})`);
});
const nap = workflow("sw_nap", async (ctx) => {
  await sleep(ctx, 0);
  await markWoken(ctx);
  return "woke";
});
const noop = workflow("sw_noop", async () => "done");

let url: string;
const opened: Database[] = [];
const open = (max: number) => {
  const d = createPostgresJsDatabase({ url, max });
  opened.push(d);
  return d;
};
const engineOn = (database: Database, dispatcher = new RecordingDispatcher()) => ({
  engine: new Engine({ storage: createStorage(database), workflows: [nap, noop], dispatcher, serviceName: "sweeper-test" }),
  dispatcher,
});
let setup: Database;

beforeAll(async () => {
  url = await freshDatabase("sweeper");
  setup = open(20);
  await migrate(setup.db);
  await setup.db.execute(sql`CREATE TABLE sw_woken (id serial PRIMARY KEY, instance_id text NOT NULL)`);
});

afterAll(async () => {
  await Promise.all(opened.map((d) => d.close()));
});

async function inChunks<T>(items: T[], size: number, fn: (item: T) => Promise<unknown>) {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

const count = async (query: ReturnType<typeof sql>) => Number((await queryRows<{ n: number }>(setup.db, query))[0]!.n);

it("two sweeps racing on separate connections over 2,000 expired timers: each fires once, every instance resumes exactly once", { timeout: 60_000 }, async () => {
  const { engine, dispatcher } = engineOn(setup);
  const ids = Array.from({ length: 2000 }, (_, i) => `nap-${i}`);
  await inChunks(ids, 100, (instanceId) => engine.start(nap, null, { instanceId }));
  await inChunks(dispatcher.requests.splice(0), 40, (req) => engine.runStep(req));
  expect(await count(sql`SELECT count(*)::int AS n FROM workflow_timer_subscriptions`)).toBe(2000);

  const a = engineOn(open(3));
  const b = engineOn(open(3));
  const reports: SweepReport[] = [];
  // Short budgets so the task lock changes hands between rounds.
  for (let round = 0; round < 200 && reports.reduce((n, r) => n + r.timersFired, 0) < 2000; round++) {
    reports.push(...(await Promise.all([a.engine.sweep({ batchSize: 100, budgetMs: 40 }), b.engine.sweep({ batchSize: 100, budgetMs: 40 })])));
  }
  expect(reports.reduce((n, r) => n + r.timersFired, 0)).toBe(2000);
  expect(reports.some((r) => r.skipped.includes("timers"))).toBe(true);
  expect(await count(sql`SELECT count(*)::int AS n FROM workflow_timer_subscriptions`)).toBe(0);
  expect(await count(sql`SELECT count(*)::int AS n FROM workflow_history WHERE event_type = 'TimerExpired'`)).toBe(2000);
  expect(await count(sql`SELECT count(DISTINCT instance_id)::int AS n FROM workflow_history WHERE event_type = 'TimerExpired'`)).toBe(2000);

  // Nothing lost: every instance was dispatched by one sweep or the other.
  const requests = [...a.dispatcher.requests, ...b.dispatcher.requests];
  expect(new Set(requests.map((r) => r.instanceId)).size).toBe(2000);
  // Dispatches that found a step in flight (or done) are skipped by the lease: each instance resumes exactly once.
  const results = { a: [] as string[], b: [] as string[] };
  await Promise.all([
    inChunks(a.dispatcher.requests, 10, async (r) => results.a.push((await a.engine.runStep(r)).status)),
    inChunks(b.dispatcher.requests, 10, async (r) => results.b.push((await b.engine.runStep(r)).status)),
  ]);
  expect([...results.a, ...results.b].filter((s) => s === "concluded")).toHaveLength(2000);
  expect(await count(sql`SELECT count(*)::int AS n FROM sw_woken`)).toBe(2000);
  expect(await count(sql`SELECT count(DISTINCT instance_id)::int AS n FROM sw_woken`)).toBe(2000);
  expect(await count(sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'sw_nap' AND status = 'completed'`)).toBe(2000);
});

describe("each task", () => {
  it("stale leases are released and their instances dispatched; runnable idle instances are dispatched", async () => {
    const { engine, dispatcher } = engineOn(open(2));
    await engine.start(noop, null, { instanceId: "stale-1" });
    await engine.start(noop, null, { instanceId: "idle-1" });
    dispatcher.requests.length = 0; // the first steps are "lost"
    const leased = await engine.storage.acquireLease("stale-1", "dead-worker", 0.2);
    expect(leased).not.toBeNull();
    await new Promise((r) => setTimeout(r, 300));

    const report = await engine.sweep({ resumeIdleSeconds: 0 });
    expect(report.staleLeasesReleased).toBe(1);
    expect(report.resumed).toBeGreaterThanOrEqual(1);
    const dispatched = dispatcher.requests.map((r) => r.instanceId);
    expect(dispatched.filter((id) => id === "stale-1")).toHaveLength(1);
    expect(dispatched.filter((id) => id === "idle-1")).toHaveLength(1);
    // The dead worker's late conclusion is fenced off.
    expect((await engine.storage.concludeStep(leased!.fence, { status: "completed" })).ok).toBe(false);
    for (const r of dispatcher.requests.splice(0)) await engine.runStep(r);
    expect((await engine.getInstance("stale-1"))?.status).toBe("completed");
    expect((await engine.getInstance("idle-1"))?.status).toBe("completed");
  });

  it("expired receive waits get MessageTimeout; waiting subscribers with a pending message get it", async () => {
    const { engine, dispatcher } = engineOn(open(2));
    const { storage } = engine;
    await storage.upsertWorkflowDefinition("sw_waiter", "h", "(receive)");
    for (const id of ["waits-timeout", "waits-deliver"]) {
      await storage.createInstance({ instanceId: id, workflowName: "sw_waiter", sourceHash: "h", ownerService: "t", inputData: "null" });
      const leased = await storage.acquireLease(id, "w", 30);
      await storage.subscribe(id, `ch-${id}`, "competing");
      expect((await storage.concludeStep(leased!.fence, { status: "waiting_for_message", currentActivityId: `receive_ch-${id}:1` })).ok).toBe(true);
    }
    await storage.setWaiting("waits-timeout", "ch-waits-timeout", "receive_ch-waits-timeout:1", new Date(Date.now() - 1000));
    await storage.setWaiting("waits-deliver", "ch-waits-deliver", "receive_ch-waits-deliver:1", null);
    await storage.publishMessage({ channel: "ch-waits-deliver", data: toPayload({ hello: 1 }) });

    const report = await engine.sweep();
    expect(report.messageWaitsExpired).toBe(1);
    expect(report.messagesDelivered).toBe(1);
    const history = async (id: string) => (await storage.loadHistory(id)).map((e) => `${e.eventType}@${e.activityId}`);
    expect(await history("waits-timeout")).toEqual(["MessageTimeout@receive_ch-waits-timeout:1"]);
    expect(await history("waits-deliver")).toEqual(["MessageReceived@receive_ch-waits-deliver:1"]);
    expect(new Set(dispatcher.requests.map((r) => r.instanceId))).toEqual(new Set(["waits-timeout", "waits-deliver"]));
    for (const id of ["waits-timeout", "waits-deliver"]) expect((await storage.getInstance(id))?.status).toBe("running");
  });

  it("channel messages older than the retention are deleted, younger ones kept", async () => {
    const { engine } = engineOn(open(2));
    await engine.storage.publishMessage({ channel: "retention", data: toPayload("old") });
    await new Promise((r) => setTimeout(r, 1100));
    await engine.storage.publishMessage({ channel: "retention", data: toPayload("new") });
    const report = await engine.sweep({ messageRetentionSeconds: 1 });
    // (other tests' older messages go too)
    expect(report.channelMessagesDeleted).toBeGreaterThanOrEqual(1);
    const left = await queryRows<{ d: string }>(setup.db, sql`SELECT data AS d FROM channel_messages WHERE channel = 'retention'`);
    expect(left.map((r) => JSON.parse(r.d))).toEqual(["new"]);
    // The default retention (7 days) keeps it.
    expect((await engine.sweep()).channelMessagesDeleted).toBe(0);
  });

  it("a task whose lock another sweep holds is skipped; a lock left by a sweep that died expires after its short lease", async () => {
    const { engine } = engineOn(open(2));
    await engine.start(nap, null, { instanceId: "locked-nap" });
    await engine.runStep({ instanceId: "locked-nap" });
    // A sweep that died holding the timers task (its lease: 1 s).
    expect(await engine.storage.tryAcquireSystemLock("edda.sweep.timers", "dead-sweep", 1)).toBe(true);
    const blocked = await engine.sweep();
    expect(blocked.skipped).toEqual(["timers"]);
    expect(blocked.timersFired).toBe(0);
    await new Promise((r) => setTimeout(r, 1100));
    const after = await engine.sweep();
    expect(after.skipped).toEqual([]);
    expect(after.timersFired).toBe(1);
    // Every lock is released at the end of a sweep.
    expect(await count(sql`SELECT count(*)::int AS n FROM system_locks WHERE locked_by IS NOT NULL`)).toBe(0);
  });

  it("a sweep past its budget starts no more tasks and says which it deferred", async () => {
    const { engine } = engineOn(open(2));
    const report = await engine.sweep({ budgetMs: 0 });
    expect(report.deferred).toEqual([
      "timers",
      "message_timeouts",
      "webhook_expiry",
      "deadlines",
      "stale_leases",
      "channel_delivery",
      "resumable",
      "parked",
      "outbox",
      "channel_retention",
      "instance_retention",
      "dedupe_retention",
      "session_retention",
      "schedules",
      "concurrency",
      "timed_starts",
      "bulk_operations",
    ]);
  });
});
