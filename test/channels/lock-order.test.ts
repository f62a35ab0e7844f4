// Lock order on real Postgres. Regression: the message-timeout sweep locked a
// subscription and then waited for its instance, while a delivery locks the
// instance and then the subscription; the timer sweep did the same against a
// cancel (instance → timers), and a receive step (subscription → its own
// instance at the conclusion) against a cancel too. Postgres broke each cycle
// with 40P01 "deadlock detected", failing a sweep task, a cancel or a step.
// Each cycle is first replayed deterministically (one side paused while it
// holds its first lock), then several engines race them freely.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MessageTimeoutError, sleep, waitMessage, workflow } from "../../src/index.ts";
import { createEdda, type Edda } from "../../src/edda.ts";
import type { SweepReport } from "../../src/engine/sweeper.ts";
import { toPayload } from "../../src/core/serialization.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import type { Storage } from "../../src/storage/types.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const waiter = workflow("lo_waiter", async (ctx) => {
  try {
    const m = await waitMessage<number>(ctx, "lo_ch", { timeoutSeconds: 3600 });
    return { got: m.data };
  } catch (err) {
    if (err instanceof MessageTimeoutError) return { timeout: true };
    throw err;
  }
});
const sleeper = workflow("lo_sleeper", async (ctx) => {
  await sleep(ctx, 3600);
  return "woke";
});

let apps: TestApp[] = [];
let admin: Database;
let adminStorage: Storage;
/** An app whose dispatcher runs nothing: its instances stay runnable for the test to drive by hand. */
let inert: Edda;
let inertDb: Database;

beforeAll(async () => {
  const pg = await freshPostgres("lock_order");
  admin = pg.open();
  adminStorage = createStorage(admin);
  apps = [0, 1, 2].map(() => makeTestApp(pg.open(), { workflows: [waiter, sleeper] }));
  inertDb = pg.open();
  inert = createEdda({ workflows: [waiter, sleeper], database: inertDb, secret: "test-secret", dispatcher: { attach() {}, dispatch() {} } });
});

afterAll(async () => {
  for (const a of apps) {
    await a.edda.close();
    await a.database.close();
  }
  await inert?.close();
  await inertDb?.close();
  await admin?.close();
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const count = async (q: ReturnType<typeof sql>) => Number((await queryRows<{ n: number }>(admin.db, q))[0]?.n ?? 0);
const status = async (id: string) => (await queryRows<{ status: string }>(admin.db, sql`SELECT status FROM workflow_instances WHERE instance_id = ${id}`))[0]?.status;
const deadlocks = async () => {
  await admin.db.execute(sql`SELECT pg_stat_clear_snapshot()`);
  return count(sql`SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()`);
};
async function until(check: () => Promise<boolean>, what: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await pause(50);
  }
}
const lockInstance = (tx: Storage, id: string) => tx.executor.execute(sql`SELECT 1 FROM workflow_instances WHERE instance_id = ${id} FOR UPDATE`);

it("a message-timeout sweep skips a wait whose instance a delivery holds, and the delivery wins", { timeout: 30_000 }, async () => {
  const [a, b] = [apps[0]!, apps[1]!];
  await a.edda.start("lo_waiter", null, { instanceId: "d-1" });
  await a.waitFor("d-1", ["waiting_for_message"]);
  await admin.db.execute(sql`UPDATE channel_subscriptions SET timeout_at = now() WHERE instance_id = 'd-1'`);
  await adminStorage.publishMessage({ channel: "lo_ch", data: toPayload(7), targetInstanceId: "d-1" }); // no wake-up: delivered by hand below

  let sweep: Promise<SweepReport> | null = null;
  await adminStorage.transaction(async (tx) => {
    await lockInstance(tx, "d-1"); // a delivery's first lock (lockWaitingSubscription)
    sweep = b.edda.sweep({ resumeIdleSeconds: 3600 });
    await pause(400); // the sweep runs while the delivery holds the instance row
    expect(await tx.lockWaitingSubscription("d-1", "lo_ch", "receive_lo_ch:1")).toBe(true);
    const msg = await tx.takeNextMessage("d-1", "lo_ch");
    expect(msg?.data).toEqual(toPayload(7));
    await tx.appendHistory("d-1", [{ activityId: "receive_lo_ch:1", eventType: "MessageReceived", data: toPayload({ messageId: msg!.messageId, channel: "lo_ch", data: 7, metadata: null, publishedAt: msg!.publishedAt.toISOString() }) }]);
    await tx.clearWaiting("d-1", "lo_ch");
  });
  const report = (await sweep!) as SweepReport;
  expect(report.failures).toEqual([]);
  expect(report.messageWaitsExpired).toBe(0);
  await a.edda.sweep({ resumeIdleSeconds: 0 }); // resumes the now-runnable instance
  expect((await a.waitFor("d-1")).output).toEqual({ got: 7 });
  expect(await count(sql`SELECT count(*)::int AS n FROM workflow_history WHERE instance_id = 'd-1' AND event_type = 'MessageTimeout'`)).toBe(0);
});

it("a timer sweep skips a timer whose instance a cancel holds, and the cancel wins", { timeout: 30_000 }, async () => {
  const [a, b] = [apps[0]!, apps[1]!];
  await a.edda.start("lo_sleeper", null, { instanceId: "t-1" });
  await a.waitFor("t-1", ["waiting_for_timer"]);
  await admin.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = now() WHERE instance_id = 't-1'`);

  let sweep: Promise<SweepReport> | null = null;
  await adminStorage.transaction(async (tx) => {
    await lockInstance(tx, "t-1"); // a cancel's first lock, held while the sweep runs
    sweep = b.edda.sweep({ resumeIdleSeconds: 3600 });
    await pause(400);
    expect((await tx.cancelInstance("t-1", "test"))?.ok).toBe(true);
  });
  const report = (await sweep!) as SweepReport;
  expect(report.failures).toEqual([]);
  expect(report.timersFired).toBe(0);
  expect(await status("t-1")).toBe("cancelled");
  expect(await count(sql`SELECT count(*)::int AS n FROM workflow_timer_subscriptions WHERE instance_id = 't-1'`)).toBe(0);
});

it("a cancel landing while a receive step holds its subscription waits for the step, then cancels", { timeout: 30_000 }, async () => {
  await inert.start("lo_waiter", null, { instanceId: "r-1" }); // runnable, no step run
  const storage = createStorage(inertDb);
  const leased = await storage.acquireLease("r-1", "test-worker", 60);
  expect(leased).not.toBeNull();
  await storage.subscribe("r-1", "lo_ch", "direct");

  let cancel: Promise<unknown> | null = null;
  await storage.transaction(async (tx) => {
    // What a step's message wait does: take (nothing queued) → mark waiting → fenced conclusion.
    expect(await tx.takeNextMessage("r-1", "lo_ch")).toBeNull();
    cancel = apps[2]!.edda.cancel("r-1", "test");
    await pause(400); // the cancel arrives while the step holds its locks
    await tx.setWaiting("r-1", "lo_ch", "receive_lo_ch:1", 3600);
    expect((await tx.concludeStep(leased!.fence, { status: "waiting_for_message", currentActivityId: "receive_lo_ch:1" })).ok).toBe(true);
  });
  await expect(cancel!).resolves.toEqual({ status: "cancelled" });
  expect(await status("r-1")).toBe("cancelled");
  expect(await count(sql`SELECT count(*)::int AS n FROM channel_subscriptions WHERE instance_id = 'r-1'`)).toBe(0);
});

it("deliveries, timeout and timer sweeps and cancels racing on three engines: no deadlock, one outcome each", { timeout: 60_000 }, async () => {
  const N = 60;
  const before = await deadlocks();
  const ids = Array.from({ length: N }, (_, i) => `w-${i}`);
  const sleepers = Array.from({ length: N }, (_, i) => `s-${i}`);
  await Promise.all(ids.map((id, i) => apps[i % 3]!.edda.start("lo_waiter", null, { instanceId: id })));
  await Promise.all(sleepers.map((id, i) => apps[i % 3]!.edda.start("lo_sleeper", null, { instanceId: id })));
  const waiting = sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status IN ('waiting_for_message', 'waiting_for_timer') AND instance_id ~ '^[ws]-'`;
  await until(async () => (await count(waiting)) === 2 * N, "all waiting");

  // Waits and timers come due across the window in which the messages and cancels go out.
  await admin.db.execute(sql`UPDATE channel_subscriptions SET timeout_at = now() + random() * interval '1 s' WHERE activity_id IS NOT NULL AND instance_id LIKE 'w-%'`);
  await admin.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = now() + random() * interval '1 s' WHERE instance_id LIKE 's-%'`);

  const reports: SweepReport[] = [];
  let racing = true;
  const sweepers = apps.map(async (a) => {
    while (racing) reports.push(await a.edda.sweep({ batchSize: 10, resumeIdleSeconds: 0 }));
  });
  const spread = (i: number) => pause((i / N) * 1000);
  const sends = ids.map((id, i) => spread(i).then(() => apps[(i + 1) % 3]!.edda.publish("lo_ch", i, { targetInstanceId: id })));
  const cancels = sleepers.map((id, i) => spread(i).then(() => apps[(i + 2) % 3]!.edda.cancel(id, "test")).then(() => "cancelled", (e: Error) => e.message));
  await Promise.all(sends);
  const cancelOutcomes = await Promise.all(cancels);
  const finished = sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status IN ('completed', 'cancelled') AND instance_id ~ '^[ws]-'`;
  await until(async () => (await count(finished)) === 2 * N, "all finished");
  racing = false;
  await Promise.all(sweepers);

  expect(reports.flatMap((r) => r.failures)).toEqual([]);
  // A cancel either won or found the sleeper already woken and finished by its timer; never a database error.
  for (const c of cancelOutcomes) expect(c === "cancelled" || /is completed and cannot be cancelled/.test(c), c).toBe(true);

  // Exactly one outcome per waiter: the message (claimed by it) or the timeout (its message left unclaimed).
  const outs = await queryRows<{ output_data: string }>(admin.db, sql`SELECT output_data FROM workflow_instances WHERE instance_id LIKE 'w-%'`);
  const got = outs.filter((o) => o.output_data.includes("got")).length;
  const timedOut = outs.filter((o) => o.output_data.includes("timeout")).length;
  expect(got + timedOut).toBe(N);
  expect(await count(sql`SELECT count(*)::int AS n FROM channel_message_claims WHERE instance_id LIKE 'w-%'`)).toBe(got);

  await pause(1500); // backends report their counters once idle
  expect(await deadlocks()).toBe(before);
});
