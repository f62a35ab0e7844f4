// Issue 34: a cancellation is never undone. On each driver:
// - a compensation that fails retryably waits out its backoff as `waiting_for_timer`; when its retry timer
//   fired the instance became `running` and the next step replayed the *body* (re-registering its
//   hour-long sleep) instead of retrying the compensation. Now every step decides body-or-compensations
//   in one place (decide.ts `phase`).
// - a second cancel (or a deadline) landing during that backoff must not rewrite how the saga ends.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineOf } from "../../src/edda.ts";
import { activity, registerCompensation, sleep, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type DriverKind, type TestApp } from "../support/engine.ts";

/** Per instance: how often its compensation ran, and how often it still has to fail. */
const undoRuns = new Map<string, number>();
const undoFailures = new Map<string, number>();
const bodyAfterSleep = new Map<string, number>();

const record = activity("cc_record", async (_ctx, key: string) => `recorded ${key}`);
const undo = activity(
  "cc_undo",
  async (_ctx, key: string) => {
    undoRuns.set(key, (undoRuns.get(key) ?? 0) + 1);
    const left = undoFailures.get(key) ?? 0;
    if (left > 0) {
      undoFailures.set(key, left - 1);
      throw new Error(`undo of ${key} failed (${left} to go)`);
    }
    return `undone ${key}`;
  },
  { retry: { maxAttempts: 10, initialIntervalSeconds: 0.2, backoffCoefficient: 1 } },
);
const afterSleep = activity("cc_after_sleep", async (_ctx, key: string) => {
  bodyAfterSleep.set(key, (bodyAfterSleep.get(key) ?? 0) + 1);
});

const saga = workflow("cc_saga", async (ctx, key: string) => {
  await record(ctx, key);
  await registerCompensation(ctx, undo, key);
  await sleep(ctx, 3600);
  await afterSleep(ctx, key);
  return "woke";
});

const timedSaga = workflow("cc_timed_saga", { timeoutSeconds: 1 }, async (ctx, input) => {
  const key = String(input);
  await record(ctx, key);
  await registerCompensation(ctx, undo, key);
  await sleep(ctx, 3600);
  return "woke";
});

describe.each<DriverKind>(["pglite", "postgres-js", "neon"])("a cancelled saga on %s", (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = makeTestApp(await openTestDatabase(kind, `cancel_comp_${kind}`), { workflows: [saga, timedSaga] });
  });
  afterAll(async () => {
    await t.edda.close();
  });

  const timersOf = async (instanceId: string) =>
    queryRows<{ timer_id: string }>(t.database.db, sql`SELECT timer_id FROM workflow_timer_subscriptions WHERE instance_id = ${instanceId} ORDER BY timer_id`);

  it.each([1, 3])("a compensation that fails %i time(s) is retried until it succeeds, and the body never resumes (issue 34)", async (failures) => {
    const key = `${kind}-${failures}`;
    undoFailures.set(key, failures);
    const { instanceId } = await t.edda.start(saga, key);
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    expect((await t.edda.cancel(instanceId, "tester")).status).toBe("compensating");
    const inst = await t.waitFor(instanceId, ["completed", "failed", "cancelled"], 20_000);
    expect(inst.status).toBe("cancelled");
    expect(inst.cancellation).toMatchObject({ cancelled_by: "tester", previous_status: "waiting_for_timer" });
    expect(undoRuns.get(key)).toBe(failures + 1);
    expect(bodyAfterSleep.get(key)).toBeUndefined();
    // The state after: no timer left (the body's hour-long sleep was never registered again), one CompensationExecuted.
    expect(await timersOf(instanceId)).toEqual([]);
    const history = inst.history!.map((h) => `${h.activityId} ${h.eventType}`);
    expect(history.filter((h) => h.startsWith("sleep:"))).toEqual([]);
    expect(history.filter((h) => h.endsWith("CompensationExecuted"))).toEqual(["compensate:compensation:1 CompensationExecuted"]);
    expect(history.filter((h) => h.includes("ActivityAttemptFailed"))).toHaveLength(failures);
  });

  it("a second cancel during a compensation's retry backoff is refused (409, compensating) and changes nothing", async () => {
    const key = `${kind}-twice`;
    undoFailures.set(key, 2);
    const { instanceId } = await t.edda.start(saga, key);
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    await t.edda.cancel(instanceId, "first");
    // The compensation failed once and waits for its retry timer.
    const deadline = Date.now() + 10_000;
    while ((undoRuns.get(key) ?? 0) < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    const before = await t.edda.getInstance(instanceId);
    await expect(t.edda.cancel(instanceId, "second")).rejects.toMatchObject({ name: "ConflictError", message: expect.stringContaining("compensating") });
    const same = await t.edda.getInstance(instanceId);
    expect(same?.cancellation).toEqual(before?.cancellation);
    const inst = await t.waitFor(instanceId, ["completed", "failed", "cancelled"], 20_000);
    expect(inst.status).toBe("cancelled");
    expect(inst.cancellation).toMatchObject({ cancelled_by: "first" });
    expect(undoRuns.get(key)).toBe(3);
  });

  it("a compensation's retry timer fired by the sweep (no in-process wake-up) continues the compensation", async () => {
    const key = `${kind}-sweep`;
    undoFailures.set(key, 1);
    const { instanceId } = await t.edda.start(saga, key);
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    await t.edda.cancel(instanceId, "tester");
    const deadline = Date.now() + 10_000;
    while ((undoRuns.get(key) ?? 0) < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    // Make the retry due now and let the cron's sweep find it.
    await t.database.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = now() - interval '1 second' WHERE instance_id = ${instanceId}`);
    await t.edda.sweep();
    const inst = await t.waitFor(instanceId, ["completed", "failed", "cancelled"], 20_000);
    expect(inst.status).toBe("cancelled");
    expect(undoRuns.get(key)).toBe(2);
    expect(bodyAfterSleep.get(key)).toBeUndefined();
    expect(await timersOf(instanceId)).toEqual([]);
  });

  it("a deadline passing during a compensation's retry backoff neither rewrites the end nor skips the backoff", async () => {
    const key = `${kind}-deadline`;
    undoFailures.set(key, 6);
    const { instanceId } = await t.edda.start(timedSaga, key);
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    await t.edda.cancel(instanceId, "tester");
    // Six failed attempts 0.2 s apart: the 1 s deadline passes while the compensation waits for a retry.
    const deadline = Date.now() + 10_000;
    while ((undoRuns.get(key) ?? 0) < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 1100));
    await t.edda.sweep();
    const inst = await t.waitFor(instanceId, ["completed", "failed", "cancelled"], 20_000);
    expect(inst.status).toBe("cancelled");
    expect(inst.error).toBeNull();
    expect(undoRuns.get(key)).toBe(7);
  });

  it("a fork cannot start at a compensation", async () => {
    const key = `${kind}-fork`;
    const { instanceId } = await t.edda.start(saga, key);
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    await t.edda.cancel(instanceId, "tester");
    await t.waitFor(instanceId, ["cancelled"]);
    await expect((await engineOf(t.edda)).fork(instanceId, { fromActivityId: "compensate:compensation:1" })).rejects.toMatchObject({ name: "ValidationError" });
  });
});
