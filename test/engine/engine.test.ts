// The replay engine end to end on PGlite and real Postgres: replay, one step
// per request, transactions, retries, saga, cancellation, non-determinism.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  activity,
  registerCompensation,
  RetryExhaustedError,
  sleep,
  TerminalError,
  workflow,
  type Workflow,
} from "../../src/index.ts";
import type { Database } from "../../src/storage/database.ts";
import { queryRows } from "../../src/storage/database.ts";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { reminder } from "../../functions/workflows/reminder.ts";
import { makeTestApp, openTestDatabase, type DriverKind, type TestApp } from "../support/engine.ts";
import { engineOf } from "../../src/edda.ts";

class InsufficientFunds extends Error {
  override name = "InsufficientFunds";
  constructor(message: string) {
    super(message);
  }
}

// --- workflows under test ------------------------------------------------------

const insertRow = activity("insert_row", async (ctx, key: string) => {
  await ctx.tx.execute(sql`INSERT INTO user_rows (key) VALUES (${key})`);
  return key;
});
const insertThenThrow = activity(
  "insert_then_throw",
  async (ctx, key: string) => {
    await ctx.tx.execute(sql`INSERT INTO user_rows (key) VALUES (${key})`);
    throw new TerminalError("boom after insert");
  },
);
const txFailsTwice = activity(
  "tx_fails_twice",
  async (ctx, key: string) => {
    await ctx.tx.execute(sql`INSERT INTO user_rows (key) VALUES (${key + ":" + ctx.attempt})`);
    if (ctx.attempt < 3) throw new Error(`transient ${ctx.attempt}`);
    return ctx.attempt;
  },
  { retry: { initialIntervalSeconds: 0.05, maxIntervalSeconds: 0.1 } },
);
const alwaysFails = activity("always_fails", async () => {
  throw new Error("always");
}, { retry: { maxAttempts: 3, initialIntervalSeconds: 0.02, backoffCoefficient: 1 } });
const throwsCustom = activity("throws_custom", async () => {
  throw new InsufficientFunds("balance 3 < 10");
}, { retry: { nonRetryableErrors: ["InsufficientFunds"] } });

const wfTxRetry = workflow("t_tx_retry", async (ctx, key: string) => txFailsTwice(ctx, key));
const wfRollback = workflow("t_rollback", async (ctx, key: string) => {
  await insertThenThrow(ctx, key);
});
const wfExhaust = workflow("t_exhaust", async (ctx) => {
  try {
    await alwaysFails(ctx);
    return "unreachable";
  } catch (e) {
    const err = e as RetryExhaustedError;
    return { name: err.name, isClass: err instanceof RetryExhaustedError, cause: (err.cause as Error | undefined)?.message };
  }
});
const wfCustomError = workflow("t_custom_error", async (ctx) => {
  try {
    await throwsCustom(ctx);
  } catch (e) {
    // on replay the recorded error must come back with its class, name and message
    return { name: (e as Error).name, message: (e as Error).message, isClass: e instanceof InsufficientFunds };
  }
  return null;
});

const stepA = activity("step_a", async (_ctx, n: number) => n * 2);
let tryCatchSawError = 0;
const wfTryCatch = workflow("t_try_catch", async (ctx) => {
  try {
    const a = await stepA(ctx, 1);
    const b = await stepA(ctx, 2);
    return { a, b };
  } catch {
    tryCatchSawError++;
    return "swallowed";
  }
});
const wfParallel = workflow("t_parallel", async (ctx) => {
  const [x, y, z] = await Promise.all([stepA(ctx, 1), stepA(ctx, 2), insertRow(ctx, `par-${ctx.instanceId}`)]);
  return [x, y, z];
});
const wfSleepy = workflow("t_sleepy", async (ctx) => {
  await stepA(ctx, 1);
  await sleep(ctx, 3600);
  return "woke";
});
const compensateRow = activity("compensate_row", async (ctx, key: string) => {
  await ctx.tx.execute(sql`INSERT INTO user_rows (key) VALUES (${"undo:" + key})`);
});
let releaseInFlight: (() => void) | null = null;
const slowInsert = activity("slow_insert", async (ctx, key: string) => {
  await ctx.tx.execute(sql`INSERT INTO user_rows (key) VALUES (${key})`);
  await new Promise<void>((r) => (releaseInFlight = r));
  return key;
});
const wfCancelInFlight = workflow("t_cancel_in_flight", async (ctx, key: string) => {
  await insertRow(ctx, `first-${key}`);
  await registerCompensation(ctx, compensateRow, `first-${key}`);
  await slowInsert(ctx, `slow-${key}`);
  return "done";
});

const workflows: Workflow[] = [orderSaga, pipeline, reminder, wfTxRetry, wfRollback, wfExhaust, wfCustomError, wfTryCatch, wfParallel, wfSleepy, wfCancelInFlight];

async function rows(db: Database, like: string): Promise<string[]> {
  const r = await queryRows<{ key: string }>(db.db, sql`SELECT key FROM user_rows WHERE key LIKE ${like} ORDER BY id`);
  return r.map((x) => x.key);
}

describe.each<DriverKind>(["pglite", "postgres-js"])("engine on %s", (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    const database = await openTestDatabase(kind, `engine_${kind}`);
    await database.db.execute(sql`CREATE TABLE user_rows (id serial PRIMARY KEY, key text NOT NULL)`);
    t = makeTestApp(database, { workflows, errorClasses: [InsufficientFunds] });
  });
  afterAll(async () => {
    await t.edda.close();
    await t.database.close();
  });

  it("runs order_saga to shipped", async () => {
    const { instanceId } = await t.edda.start(orderSaga, { orderId: "o1", amount: 10 });
    const inst = await t.waitFor(instanceId);
    expect(inst.status).toBe("completed");
    expect(inst.output).toEqual({ orderId: "o1", status: "shipped" });
    const ids = (inst.history as { activityId: string }[]).map((h) => h.activityId);
    expect(ids).toEqual(["reserve_inventory:1", "charge_payment:1", "ship_order:1"]);
  });

  it("compensates newest first when a step fails for good, then ends failed", async () => {
    const { instanceId } = await t.edda.start(orderSaga, { orderId: "o2", amount: 10, failAt: "shipping" });
    const inst = await t.waitFor(instanceId);
    expect(inst.status).toBe("failed");
    expect(inst.error).toMatchObject({ error_type: "TerminalError", error_message: "no carrier available for o2" });
    const hist = inst.history as { activityId: string; eventType: string }[];
    const comps = hist.filter((h) => h.eventType === "CompensationExecuted").map((h) => h.activityId);
    expect(comps).toEqual(["compensate:compensation:2", "compensate:compensation:1"]);
    expect(hist.find((h) => h.activityId === "ship_order:1")?.eventType).toBe("ActivityFailed");
  });

  it("rejects invalid input with the zod issues and creates nothing", async () => {
    const before = await t.edda.findInstances({ workflowName: "order_saga" });
    await expect(t.edda.start(orderSaga, { orderId: "", amount: -1 } as never)).rejects.toMatchObject({ name: "ValidationError" });
    const after = await t.edda.findInstances({ workflowName: "order_saga" });
    expect(after.instances.length).toBe(before.instances.length);
  });

  it("starting with an existing instanceId returns the existing instance", async () => {
    const a = await t.edda.start(pipeline, { steps: 1 }, { instanceId: `same-${kind}` });
    const b = await t.edda.start(pipeline, { steps: 2 }, { instanceId: `same-${kind}` });
    expect(a.created).toBe(true);
    expect(b.created).toBe(false);
    expect((await t.waitFor(`same-${kind}`)).output).toEqual({ completed: 1 });
  });

  it("suspension cannot be swallowed by a try/catch around the whole workflow", async () => {
    const { instanceId } = await t.edda.start(wfTryCatch, null);
    const inst = await t.waitFor(instanceId);
    expect(inst.output).toEqual({ a: 2, b: 4 });
    expect(tryCatchSawError).toBe(0);
  });

  it("activities invoked in the same tick run together in one step", async () => {
    const { instanceId } = await t.edda.start(wfParallel, null);
    const inst = await t.waitFor(instanceId);
    expect(inst.output).toEqual([2, 4, `par-${instanceId}`]);
    const hist = inst.history as { activityId: string; createdAt: string }[];
    expect(hist.map((h) => h.activityId).sort()).toEqual(["insert_row:1", "step_a:1", "step_a:2"]);
    // one step = one transaction: now() is the transaction's start time
    expect(new Set(hist.map((h) => h.createdAt)).size).toBe(1);
  });

  it("a transactional activity that writes then throws leaves no row", async () => {
    const key = `rb-${kind}`;
    const { instanceId } = await t.edda.start(wfRollback, key);
    const inst = await t.waitFor(instanceId);
    expect(inst.status).toBe("failed");
    expect(await rows(t.database, key)).toEqual([]);
  });

  it("retries durably: failed attempts roll back, are recorded, and the third attempt's row is written once", async () => {
    const key = `retry-${kind}`;
    const { instanceId } = await t.edda.start(wfTxRetry, key);
    const inst = await t.waitFor(instanceId);
    expect(inst.status).toBe("completed");
    expect(inst.output).toBe(3);
    expect(await rows(t.database, `${key}:%`)).toEqual([`${key}:3`]);
    const hist = inst.history as { activityId: string; eventType: string }[];
    expect(hist.filter((h) => h.eventType === "ActivityAttemptFailed").map((h) => h.activityId)).toEqual(["tx_fails_twice:1#1", "tx_fails_twice:1#2"]);
  });

  it("raises RetryExhaustedError with the last error as cause, restored on replay", async () => {
    const { instanceId } = await t.edda.start(wfExhaust, null);
    const inst = await t.waitFor(instanceId);
    expect(inst.output).toEqual({ name: "RetryExhaustedError", isClass: true, cause: "always" });
  });

  it("re-throws a recorded error as its original class, name and message", async () => {
    const { instanceId } = await t.edda.start(wfCustomError, null);
    const inst = await t.waitFor(instanceId);
    expect(inst.output).toEqual({ name: "InsufficientFunds", message: "balance 3 < 10", isClass: true });
  });

  it("the local dispatcher wakes a short sleep on time, with no sweep running", async () => {
    const { instanceId } = await t.edda.start(reminder, { seconds: 0.5 });
    const started = Date.now();
    const inst = await t.waitFor(instanceId);
    expect(inst.output).toEqual({ reminded: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
  });

  it("cancels a sleeping instance: timer cleared, cancellation recorded", async () => {
    const { instanceId } = await t.edda.start(wfSleepy, null);
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    const r = await t.edda.cancel(instanceId, "tester");
    expect(r.status).toBe("cancelled");
    const inst = await t.waitFor(instanceId);
    expect(inst.cancellation).toMatchObject({ cancelled_by: "tester", previous_status: "waiting_for_timer" });
    const timers = await queryRows(t.database.db, sql`SELECT 1 FROM workflow_timer_subscriptions WHERE instance_id = ${instanceId}`);
    expect(timers).toEqual([]);
    await expect(t.edda.cancel(instanceId)).rejects.toMatchObject({ name: "ConflictError" });
  });

  // Needs two connections (the cancel lands while the step's transaction is open);
  // PGlite has one, so this is a real-Postgres case.
  const concurrentIt = kind === "pglite" ? () => undefined : it;
  concurrentIt("a cancel landing while a step is in flight: that step commits nothing, compensations run", async () => {
    const key = `cif-${kind}`;
    const { instanceId } = await t.edda.start(wfCancelInFlight, key);
    const deadline = Date.now() + 10_000;
    while (!releaseInFlight && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(releaseInFlight).not.toBeNull();
    const release = releaseInFlight!;
    releaseInFlight = null;
    try {
      expect((await t.edda.cancel(instanceId, "tester")).status).toBe("compensating");
    } finally {
      release();
    }
    const inst = await t.waitFor(instanceId);
    expect(inst.status).toBe("cancelled");
    expect(await rows(t.database, `slow-${key}`)).toEqual([]);
    expect(await rows(t.database, `%first-${key}`)).toEqual([`first-${key}`, `undo:first-${key}`]);
  });

  it("an in-process follow-up continues the run in memory: no history load, no replay", async () => {
    const engine = await engineOf(t.edda);
    const hits = engine.warmRuns.hits;
    const before = t.database.stats.statements;
    const { instanceId } = await t.edda.start(pipeline, { steps: 30 });
    await t.dispatcher.idle();
    expect((await t.edda.getInstance(instanceId))?.output).toEqual({ completed: 30 });
    expect(engine.warmRuns.hits - hits).toBeGreaterThanOrEqual(28);
    // start + first step + 29 warm steps, each warm step one fenced conclusion (plus BEGIN/COMMIT where the driver logs them)
    expect((t.database.stats.statements - before) / 30).toBeLessThanOrEqual(kind === "pglite" ? 3 : 1.2);
  });

  it("a start hands its lease to the first step: that step takes no lease and reads no history", async () => {
    const engine = await engineOf(t.edda);
    await t.edda.start(pipeline, { steps: 1 }); // the definition is recorded by an earlier start
    await t.dispatcher.idle();
    const hits = engine.warmRuns.hits;
    const before = t.database.stats.statements;
    const { instanceId } = await t.edda.start(pipeline, { steps: 5 });
    await t.dispatcher.idle();
    const used = t.database.stats.statements - before;
    expect((await t.edda.getInstance(instanceId))?.output).toEqual({ completed: 5 });
    // Every step began in memory, the first one from the row the start created (leased to it).
    expect(engine.warmRuns.hits - hits).toBe(5);
    // The start, then each step's fenced conclusion (the last one completes the run); PGlite logs BEGIN/COMMIT too.
    if (kind === "postgres-js") expect(used).toBe(1 + 5);
    const [row] = await queryRows<{ locked_by: string | null; lock_token: string }>(t.database.db, sql`SELECT locked_by, lock_token::text FROM workflow_instances WHERE instance_id = ${instanceId}`);
    // Created with token 1, then one bump per conclusion: nothing else touched the lease.
    expect(row).toEqual({ locked_by: null, lock_token: "6" });
  });

  it("holds the per-step statement budget (≤ 3 engine statements per step)", async () => {
    const steps = 20;
    const before = t.database.stats.statements;
    const { instanceId } = await t.edda.start(pipeline, { steps });
    await t.waitFor(instanceId);
    await t.dispatcher.idle();
    // waitFor's polling adds 2 statements per poll; measure with a quiet dispatcher instead
    const used = t.database.stats.statements - before;
    expect(used).toBeGreaterThan(0);
    const start = t.database.stats.statements;
    const { instanceId: id2 } = await t.edda.start(pipeline, { steps });
    await t.dispatcher.idle();
    const perStep = (t.database.stats.statements - start) / (steps + 1);
    const inst = await t.edda.getInstance(id2);
    expect(inst?.status).toBe("completed");
    expect(perStep).toBeLessThanOrEqual(3);
  });
});

describe("non-determinism", () => {
  it("parks the instance (not failed, nothing compensated) with a NonDeterminismError naming both activities", async () => {
    const database = await openTestDatabase("pglite", "nondet");
    const first = activity("nd_first", async () => 1);
    const other = activity("nd_other", async () => 2);
    const v1 = workflow("t_nondet", async (ctx) => {
      await first(ctx);
      await sleep(ctx, 3600);
      return "v1";
    });
    const v2 = workflow("t_nondet", async (ctx) => {
      await other(ctx);
      await sleep(ctx, 3600);
      return "v2";
    });
    // One deployment id across the change (EDDA_DEPLOYMENT kept): the new code takes the instance over and
    // parks it. With a new deployment id it would stay on v1's code instead (deployment-versions.test.ts).
    const a = makeTestApp(database, { workflows: [v1], deployment: "nondet-prod" });
    const { instanceId } = await a.edda.start(v1, null);
    await a.waitFor(instanceId, ["waiting_for_timer"]);
    await a.edda.close();
    // the deployed code changes under a waiting instance
    await database.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = now() - interval '1 second'`);
    const b = makeTestApp(database, { workflows: [v2], deployment: "nondet-prod" });
    await b.edda.sweep();
    const inst = await b.waitFor(instanceId, ["parked"]);
    expect(inst.status).toBe("parked");
    expect(inst.error).toMatchObject({ error_type: "NonDeterminismError" });
    const msg = (inst.error as { error_message: string }).error_message;
    expect(msg).toContain("nd_first");
    expect(msg).toContain("nd_other");
    await b.edda.close();
    await database.close();
  });
});
