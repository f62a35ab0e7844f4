// The step's decision (engine/decide.ts), pure: for each kind of outcome, the
// plan the fenced conclusion carries out — status, records, compensations,
// timer, the lease handed to the follow-up — or the one piece of I/O the step
// does first. No database, no clock of its own: `now` is passed in. (The pure
// stepper of the property suites carries the same plans out; this file names
// what each plan is.)
import { describe, expect, it } from "vitest";
import { NonDeterminismError, TerminalError } from "../../src/core/errors.ts";
import { EV } from "../../src/core/model.ts";
import type { PendingActivity } from "../../src/core/replay.ts";
import { activity } from "../../src/index.ts";
import { compensationRows, continueWith, decide, needsStoredCompensations, parkConclusion, withLookAhead, type StepHistory } from "../../src/engine/decide.ts";

const NOW = Date.parse("2026-12-04T12:00:00Z");
const options = { handoffLeaseSeconds: 30, now: NOW };
const empty: StepHistory = { records: [], compensations: [] };
const recorded: StepHistory = {
  records: [{ activityId: "note:1", eventType: EV.ActivityCompleted, data: { kind: "json", text: '"n"' } as never }],
  compensations: [{ activityId: "refund:1", activityName: "refund", args: "[1]" }],
};
const charge = activity("decide_charge", async (_ctx, n: number) => n * 2, { retry: { maxAttempts: 3, initialIntervalSeconds: 2 } });
const pending = (attempt = 1): PendingActivity => ({ activityId: "decide_charge:1", activity: charge as never, args: [21], attempt, firstFailureAt: null, lastFailureAt: null });

describe("decide: the workflow's own outcomes", () => {
  it("completed: the output stored, no lease kept, the completion hook after the commit", () => {
    const plan = decide({ kind: "completed", output: { ok: 1 } }, recorded, options);
    expect(plan).toMatchObject({ kind: "conclude", conclusion: { status: "completed", currentActivityId: null, outputData: '{"ok":1}', history: recorded.records }, after: { workflow: { kind: "completed", output: { ok: 1 } } } });
    expect(plan.kind === "conclude" && plan.conclusion.handoff).toBeUndefined();
  });

  it("completed with an output that cannot be stored fails the run, once, with the typed error", () => {
    const plan = decide({ kind: "completed", output: { f: () => 1 } }, empty, options);
    expect(plan).toMatchObject({ kind: "conclude", conclusion: { status: "failed" }, after: { workflow: { kind: "failed", error: { name: "UnserializableValueError" } } } });
    expect(needsStoredCompensations({ kind: "completed", output: { f: () => 1 } }, empty)).toBe(true);
    expect(needsStoredCompensations({ kind: "completed", output: 1 }, empty)).toBe(false);
  });

  it("failed: compensating with a hand-off when compensations exist (this step's or stored), failed otherwise", () => {
    const error = new TerminalError("no stock");
    const withOwn = decide({ kind: "failed", error }, recorded, options);
    expect(withOwn).toMatchObject({ kind: "conclude", conclusion: { status: "compensating", compensations: recorded.compensations, handoff: { leaseSeconds: 30 } }, after: {} });
    const withStored = decide({ kind: "failed", error }, empty, { ...options, hasStoredCompensations: true });
    expect(withStored).toMatchObject({ conclusion: { status: "compensating" } });
    const none = decide({ kind: "failed", error }, empty, options);
    expect(none).toMatchObject({ conclusion: { status: "failed", currentActivityId: null }, after: { workflow: { kind: "failed", error } } });
    expect(none.kind === "conclude" && JSON.parse(none.conclusion.errorData!)).toMatchObject({ error_type: "TerminalError", error_message: "no stock" });
    // Only a failure with nothing registered in this step reads the stored ones.
    expect(needsStoredCompensations({ kind: "failed", error }, empty)).toBe(true);
    expect(needsStoredCompensations({ kind: "failed", error }, recorded)).toBe(false);
  });

  it("a NonDeterminismError never compensates; the divergence itself parks with the deployed code's hash, dropping what the replay recorded", () => {
    const error = new NonDeterminismError("expected a, got b");
    expect(decide({ kind: "failed", error }, recorded, options)).toMatchObject({ conclusion: { status: "failed" } });
    expect(needsStoredCompensations({ kind: "failed", error }, empty)).toBe(false);
    const plan = decide({ kind: "nondeterminism", error }, recorded, options);
    expect(plan).toEqual({ kind: "park", error });
    const parked = parkConclusion(error, "a:1", "hash-123");
    expect(parked.conclusion).toMatchObject({ status: "parked", currentActivityId: "a:1", parkedHash: "hash-123" });
    expect(parked.conclusion.history).toBeUndefined();
    expect(parked.after.warn).toContain("expected a, got b");
  });

  it("activities and recur name their I/O first; the history recorded so far travels with them", () => {
    expect(decide({ kind: "activities", activities: [pending()] }, recorded, options)).toEqual({ kind: "run", activities: [pending()], as: "activity", history: recorded });
    expect(decide({ kind: "recur", input: { n: 2 } }, recorded, options)).toEqual({ kind: "recur", input: { n: 2 }, history: recorded });
  });
});

describe("decide: settled activities", () => {
  it("a success records the result and hands the lease to the follow-up", () => {
    const plan = decide({ kind: "settled", results: [{ pending: pending(), outcome: { ok: true, value: 42 } }], as: "activity", currentActivityId: "decide_charge:1" }, empty, options);
    expect(plan.conclusion).toMatchObject({ status: "running", currentActivityId: "decide_charge:1", handoff: { leaseSeconds: 30 } });
    expect(plan.conclusion.history).toEqual([expect.objectContaining({ activityId: "decide_charge:1", eventType: EV.ActivityCompleted })]);
    expect(plan.conclusion.timer).toBeUndefined();
    expect(plan.after.activities).toHaveLength(1);
  });

  it("a retryable failure records the attempt and waits for its retry timer, woken in-process at its delay", () => {
    const plan = decide({ kind: "settled", results: [{ pending: pending(1), outcome: { ok: false, error: new Error("flaky") } }], as: "activity", currentActivityId: "decide_charge:1" }, empty, options);
    expect(plan.conclusion).toMatchObject({ status: "waiting_for_timer", timer: { timerId: "decide_charge:1#retry1", delaySeconds: 2 } });
    expect(plan.conclusion.history).toEqual([expect.objectContaining({ activityId: "decide_charge:1#1", eventType: EV.ActivityAttemptFailed })]);
    expect(plan.conclusion.handoff).toBeUndefined();
    expect(plan.after.wakeInSeconds).toBe(2);
  });

  it("the last attempt records the failure and hands off: the follow-up replays into the error", () => {
    const plan = decide({ kind: "settled", results: [{ pending: pending(3), outcome: { ok: false, error: new Error("flaky") } }], as: "activity", currentActivityId: "decide_charge:1" }, empty, options);
    expect(plan.conclusion).toMatchObject({ status: "running", handoff: { leaseSeconds: 30 } });
    expect(plan.conclusion.history).toEqual([expect.objectContaining({ activityId: "decide_charge:1", eventType: EV.ActivityFailed })]);
  });

  it("a settled compensation keeps the instance compensating", () => {
    const plan = decide({ kind: "settled", results: [{ pending: pending(), outcome: { ok: true, value: null } }], as: "compensation", currentActivityId: "compensate:refund:1" }, empty, options);
    expect(plan.conclusion).toMatchObject({ status: "compensating", handoff: { leaseSeconds: 30 } });
    expect(plan.conclusion.history).toEqual([expect.objectContaining({ eventType: EV.CompensationExecuted })]);
  });
});

describe("decide: the saga", () => {
  const registered = [
    { activityId: "refund:2", activityName: "refund", args: "[2]" },
    { activityId: "refund:1", activityName: "refund", args: "[1]" },
  ];
  it("runs the newest compensation not yet recorded, then ends cancelled or failed with the stored error", () => {
    expect(decide({ kind: "compensating", registered, recorded: new Set<string>(), cancelled: false, errorData: null }, empty, options)).toEqual({ kind: "compensate", activityId: "compensate:refund:2", compensation: registered[0] });
    expect(decide({ kind: "compensating", registered, recorded: new Set(["compensate:refund:2"]), cancelled: false, errorData: null }, empty, options)).toMatchObject({ kind: "compensate", activityId: "compensate:refund:1" });
    const all = new Set(["compensate:refund:2", "compensate:refund:1"]);
    expect(decide({ kind: "compensating", registered, recorded: all, cancelled: true, errorData: null }, empty, options)).toMatchObject({ conclusion: { status: "cancelled" }, after: { workflow: { kind: "cancelled" } } });
    const errorData = JSON.stringify({ error_type: "TerminalError", error_message: "no stock" });
    expect(decide({ kind: "compensating", registered, recorded: all, cancelled: false, errorData }, empty, options)).toMatchObject({ conclusion: { status: "failed" }, after: { workflow: { kind: "failed", error: { error_type: "TerminalError" } } } });
  });
});

describe("the plans after a step's first decision", () => {
  it("withLookAhead folds what the run did next into the same conclusion; a completion ends the run in this step", () => {
    const settled = decide({ kind: "settled", results: [{ pending: pending(), outcome: { ok: true, value: 42 } }], as: "activity", currentActivityId: "decide_charge:1" }, empty, options);
    expect(withLookAhead(settled, null)).toBe(settled);
    const reg = { activityId: "r:1", activityName: "refund", args: [42] };
    const more = withLookAhead(settled, { outcome: { kind: "activities", activities: [] }, newEvents: [], newCompensations: [reg] } as never);
    expect(more.conclusion.compensations).toEqual(compensationRows([reg]));
    expect(more.conclusion.status).toBe("running");
    const done = withLookAhead(settled, { outcome: { kind: "completed", output: 84 }, newEvents: [], newCompensations: [] } as never);
    expect(done.conclusion).toMatchObject({ status: "completed", outputData: "84", currentActivityId: null });
    expect(done.conclusion.handoff).toBeUndefined();
    expect(done.after.workflow).toEqual({ kind: "completed", output: 84 });
    // An output that cannot be stored is left to the follow-up, which fails the run.
    const unstorable = withLookAhead(settled, { outcome: { kind: "completed", output: () => 1 }, newEvents: [], newCompensations: [] } as never);
    expect(unstorable.conclusion).toMatchObject({ status: "running", handoff: { leaseSeconds: 30 } });
  });

  it("continueWith records a wait's outcome that was already there and hands the lease on", () => {
    const event = { activityId: "receive_jobs:1", eventType: EV.MessageReceived, data: { kind: "json", text: "1" } as never };
    expect(continueWith("receive_jobs:1", recorded, event, options).conclusion).toEqual({
      status: "running",
      currentActivityId: "receive_jobs:1",
      history: [...recorded.records, event],
      compensations: recorded.compensations,
      handoff: { leaseSeconds: 30 },
    });
  });
});
