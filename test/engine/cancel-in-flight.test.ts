// Issue 34, the second hole: `registerCompensation(ctx, undo)` and then, in the same step, a long
// non-transactional call. A cancel (or the workflow's deadline) during the call ended the instance
// `cancelled` with the compensation run 0 times: the registration was persisted only with the step's
// conclusion, which the cancel fences off. Now the step stores its registrations before its activities
// run, and the end keeps the lock for the step it fenced out: the compensation runs once the call was
// stopped (its ctx.signal aborted) or has ended — never while the "do" is still in flight.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, registerCompensation, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type DriverKind, type TestApp } from "../support/engine.ts";

/** Per key, in order: when the call started and ended, when the undo ran. */
const events = new Map<string, string[]>();
const note = (key: string, what: string) => events.set(key, [...(events.get(key) ?? []), what]);
const started = new Set<string>();

const undo = activity("cif_undo", async (_ctx, key: string) => {
  note(key, "undo");
});
/** A 20 s external call that stops when its signal aborts (`listens`), or runs 1.5 s ignoring it. */
const call = activity(
  "cif_call",
  async (ctx, key: string, listens: boolean) => {
    started.add(key);
    note(key, "call started");
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, listens ? 20_000 : 1_500);
      if (listens) {
        ctx.signal.addEventListener("abort", () => {
          clearTimeout(t);
          resolve();
        });
      }
    });
    note(key, listens && ctx.signal.aborted ? "call aborted" : "call ended");
    return "charged";
  },
  { transactional: false },
);

const charge = workflow("cif_charge", { lockTimeoutSeconds: 1 }, async (ctx, input) => {
  const [key, listens] = input as [string, boolean];
  await registerCompensation(ctx, undo, key);
  return call(ctx, key, listens);
});
const plainCall = workflow("cif_plain_call", { lockTimeoutSeconds: 1 }, async (ctx, input) => {
  const [key, listens] = input as [string, boolean];
  return call(ctx, key, listens);
});
const timedCharge = workflow("cif_timed_charge", { lockTimeoutSeconds: 1, timeoutSeconds: 1 }, async (ctx, input) => {
  const [key, listens] = input as [string, boolean];
  await registerCompensation(ctx, undo, key);
  return call(ctx, key, listens);
});

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each<DriverKind>(["pglite", "postgres-js", "neon"])("an end landing during a step's long call on %s", (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = makeTestApp(await openTestDatabase(kind, `cancel_flight_${kind}`), { workflows: [charge, plainCall, timedCharge] });
  });
  afterAll(async () => {
    await t.edda.close();
  });

  it.each([true, false])("a cancel during the call runs the compensation once, after the call (listens to ctx.signal: %s)", async (listens) => {
    const key = `${kind}-cancel-${listens}`;
    const { instanceId } = await t.edda.start(charge, [key, listens]);
    await until(() => started.has(key));
    expect((await t.edda.cancel(instanceId, "tester")).status).toBe("compensating");
    const inst = await t.waitFor(instanceId, ["completed", "failed", "cancelled"], 25_000);
    expect(inst.status).toBe("cancelled");
    expect(events.get(key)).toEqual(["call started", listens ? "call aborted" : "call ended", "undo"]);
    // The late call's result committed nothing: no activity record, one CompensationExecuted.
    const history = inst.history!.map((h) => `${h.activityId} ${h.eventType}`);
    expect(history.filter((h) => h.startsWith("cif_call:"))).toEqual([]);
    expect(history.filter((h) => h.endsWith("CompensationExecuted"))).toHaveLength(1);
    // The state after: nobody holds the instance.
    expect((await t.edda.getInstance(instanceId))?.status).toBe("cancelled");
  });

  it("a deadline passing during the call runs the compensation once, after the call, and fails the run", async () => {
    const key = `${kind}-deadline`;
    const { instanceId } = await t.edda.start(timedCharge, [key, true]);
    await until(() => started.has(key));
    await new Promise((r) => setTimeout(r, 1100));
    await t.edda.sweep();
    const inst = await t.waitFor(instanceId, ["completed", "failed", "cancelled"], 25_000);
    expect(inst.status).toBe("failed");
    expect(inst.error).toMatchObject({ error_type: "WorkflowTimeoutError" });
    expect(events.get(key)).toEqual(["call started", "call aborted", "undo"]);
  });

  it("a cancel of an instance whose step is in flight with nothing registered ends it cancelled once the step is over", async () => {
    const key = `${kind}-none`;
    const { instanceId } = await t.edda.start(plainCall, [key, true]);
    await until(() => started.has(key));
    expect((await t.edda.cancel(instanceId, "tester")).status).toBe("compensating");
    const inst = await t.waitFor(instanceId, ["completed", "failed", "cancelled"], 25_000);
    expect(inst.status).toBe("cancelled");
    expect(events.get(key)).toEqual(["call started", "call aborted"]);
  });
});
