// Timeouts on real Postgres. A workflow's `timeoutSeconds` fails the run
// with WorkflowTimeoutError and runs its compensations exactly once, even
// with two engines sweeping at the same moment; its running children are
// cancelled with it; a parent waiting on it hears ChildWorkflowError. An
// activity's `timeoutSeconds` abandons the attempt (its transaction's writes
// roll back) and counts as a failed attempt under the retry policy.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, ChildWorkflowError, invoke, registerCompensation, sleep, startChild, workflow } from "../../src/index.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const undo = activity("to_undo", async (ctx, who: string) => {
  await ctx.tx.execute(sql`INSERT INTO to_log (what) VALUES (${`undo ${who}`})`);
  return null;
});
const reserve = activity("to_reserve", async () => "reserved");
const slowWorkflow = workflow("to_slow", { timeoutSeconds: 1 }, async (ctx, who) => {
  await reserve(ctx);
  await registerCompensation(ctx, undo, String(who));
  await sleep(ctx, 3600);
  return "never";
});
const idleChild = workflow("to_idle_child", async (ctx) => {
  await sleep(ctx, 3600);
  return null;
});
const slowParent = workflow("to_slow_parent", { timeoutSeconds: 1 }, async (ctx) => {
  await startChild(ctx, idleChild, null);
  await sleep(ctx, 3600);
});
const waitsForSlow = workflow("to_waits", async (ctx) => {
  try {
    return await invoke(ctx, slowWorkflow, "child");
  } catch (e) {
    return { error: (e as ChildWorkflowError).name, cause: ((e as Error).cause as Error).name };
  }
});

let calls = 0;
const sometimesSlow = activity(
  "to_sometimes_slow",
  async (ctx) => {
    calls++;
    await ctx.tx.execute(sql`INSERT INTO to_log (what) VALUES (${`attempt ${ctx.attempt}`})`);
    if (ctx.attempt === 1) await new Promise((r) => setTimeout(r, 3000));
    return `attempt ${ctx.attempt}`;
  },
  { timeoutSeconds: 0.3, retry: { maxAttempts: 3, initialIntervalSeconds: 0.05 } },
);
const alwaysSlow = activity("to_always_slow", () => new Promise((r) => setTimeout(() => r("late"), 3000)), {
  timeoutSeconds: 0.2,
  retry: { maxAttempts: 2, initialIntervalSeconds: 0.05 },
  transactional: false,
});
const activityTimeouts = workflow("to_activity", async (ctx) => {
  const first = await sometimesSlow(ctx);
  try {
    await alwaysSlow(ctx);
    return { first, second: "no timeout" };
  } catch (e) {
    return { first, second: (e as Error).name, cause: ((e as Error).cause as Error).name };
  }
});

let pg: { url: string; open(): Database };
let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  pg = await freshPostgres("timeouts");
  const workflows = [slowWorkflow, idleChild, slowParent, waitsForSlow, activityTimeouts];
  a = makeTestApp(pg.open(), { workflows, serviceName: "a" });
  b = makeTestApp(pg.open(), { workflows, serviceName: "b" });
  await a.database.db.execute(sql`CREATE TABLE to_log (id serial PRIMARY KEY, what text NOT NULL)`);
});

afterAll(async () => {
  for (const app of [a, b]) {
    await app?.dispatcher.close();
    await app?.database.close();
  }
});

const log = async () => (await queryRows<{ what: string }>(a.database.db, sql`SELECT what FROM to_log ORDER BY id`)).map((r) => r.what);

describe("workflow timeoutSeconds", () => {
  it("fails the run with WorkflowTimeoutError and runs its compensations once while two engines sweep at once", { timeout: 60_000 }, async () => {
    const ids = await Promise.all(["w1", "w2", "w3"].map((who) => a.edda.start("to_slow", who).then((r) => r.instanceId)));
    for (const id of ids) await a.waitFor(id, ["waiting_for_timer"]);
    const view = await a.edda.getInstance(ids[0]!);
    expect(view?.deadlineAt).not.toBeNull();
    await new Promise((r) => setTimeout(r, 1100));
    // Both engines race to expire the same deadlines (their in-process wake-ups race too).
    const reports = await Promise.all([a.edda.sweep(), b.edda.sweep(), a.edda.sweep(), b.edda.sweep()]);
    expect(reports.reduce((n, r) => n + r.deadlinesExpired, 0) + 0).toBeLessThanOrEqual(3);
    for (const id of ids) {
      const done = await a.waitFor(id, ["failed"]);
      expect((done.error as { error_type: string }).error_type).toBe("WorkflowTimeoutError");
      expect((done.history ?? []).filter((h) => h.eventType === "CompensationExecuted")).toHaveLength(1);
    }
    expect((await log()).filter((w) => w.startsWith("undo")).sort()).toEqual(["undo w1", "undo w2", "undo w3"]);
    // Nothing is left to expire: a later sweep finds no deadline, and valid work still flows.
    expect((await a.edda.sweep()).deadlinesExpired).toBe(0);
  });

  it("cancels the timed-out run's children, and a parent invoking it gets ChildWorkflowError caused by WorkflowTimeoutError", { timeout: 60_000 }, async () => {
    const { instanceId: parent } = await b.edda.start("to_slow_parent", null);
    await a.waitFor(parent, ["waiting_for_timer"]);
    const child = (await a.edda.getInstance(parent))!.children[0]!.instanceId;
    const { instanceId: waiter } = await a.edda.start("to_waits", null);
    const failedParent = await a.waitFor(parent, ["failed"], 20_000);
    expect((failedParent.error as { error_type: string }).error_type).toBe("WorkflowTimeoutError");
    expect((await a.waitFor(child, ["cancelled"])).cancellation).toMatchObject({ cancelled_by: `parent:${parent}` });
    expect((await a.waitFor(waiter, ["completed"], 20_000)).output).toEqual({ error: "ChildWorkflowError", cause: "WorkflowTimeoutError" });
  });
});

describe("activity timeoutSeconds", () => {
  it("abandons an attempt past its limit (its writes roll back), counts it as failed and retries; exhausted retries raise RetryExhaustedError", { timeout: 60_000 }, async () => {
    const { instanceId } = await a.edda.start("to_activity", null);
    const done = await a.waitFor(instanceId, ["completed", "failed"], 30_000);
    expect(done.output).toEqual({ first: "attempt 2", second: "RetryExhaustedError", cause: "ActivityTimeoutError" });
    const failedAttempts = (done.history ?? []).filter((h) => h.eventType === "ActivityAttemptFailed");
    expect(failedAttempts.map((h) => (h.data as { error: { name: string } }).error.name)).toEqual(["ActivityTimeoutError", "ActivityTimeoutError"]);
    // The timed-out first attempt's insert was rolled back with its transaction; the second committed.
    await new Promise((r) => setTimeout(r, 3000));
    expect((await log()).filter((w) => w.startsWith("attempt"))).toEqual(["attempt 2"]);
    expect(calls).toBe(2);
  });
});
