// The table of wait kinds (engine/wait-kinds.ts): every kind of WaitRequest
// has a row with every handler (checked by the compiler: the expected type
// errors below fail the type check if a table missing a row compiled), and
// the rows agree with the model: one waiting status each, a status the
// database accepts, one sweep task per kind that comes due by itself.
import { describe, expect, it } from "vitest";
import { INSTANCE_STATUSES } from "../../src/core/model.ts";
import { decide, waitingPlan } from "../../src/engine/decide.ts";
import { EXPIRIES, WAIT_KINDS, waitKindOf, type WaitKindTable } from "../../src/engine/wait-kinds.ts";

describe("wait kinds", () => {
  it("a table without a row for every kind does not compile", () => {
    // @ts-expect-error the child and webhook rows are missing
    const incomplete: WaitKindTable = { timer: WAIT_KINDS.timer, message: WAIT_KINDS.message };
    // @ts-expect-error a row without its view handler
    const partial: WaitKindTable = { ...WAIT_KINDS, child: { ...WAIT_KINDS.child, view: undefined } };
    expect(Object.keys(incomplete)).toEqual(["timer", "message"]);
    expect(partial.child.view).toBeUndefined();
  });

  it("each kind has its own waiting status, one the instance table accepts, found back from it", () => {
    const statuses = Object.values(WAIT_KINDS).map((k) => k.status);
    expect(new Set(statuses).size).toBe(statuses.length);
    for (const [kind, row] of Object.entries(WAIT_KINDS)) {
      expect(INSTANCE_STATUSES).toContain(row.status);
      expect(waitKindOf(row.status)?.kind).toBe(kind);
    }
    expect(waitKindOf("running")).toBeUndefined();
  });

  it("the sweep runs one expiry task per kind that comes due by itself", () => {
    expect(EXPIRIES.map((e) => e.task)).toEqual(["timers", "message_timeouts", "webhook_expiry"]);
    expect(WAIT_KINDS.child.expire).toBeNull();
  });

  it("a timer concludes in the decision itself; the kinds that look at the database first are left to their prepare", () => {
    const history = { records: [], compensations: [] };
    const now = Date.parse("2026-12-01T00:00:00Z");
    const timer = decide({ kind: "wait", wait: { kind: "timer", activityId: "sleep:1", delaySeconds: 5 } }, history, { handoffLeaseSeconds: 30, now });
    expect(timer).toMatchObject({ kind: "conclude", conclusion: { status: "waiting_for_timer", timer: { timerId: "sleep:1", delaySeconds: 5 } }, after: { wakeInSeconds: 5 } });
    const until = decide({ kind: "wait", wait: { kind: "timer", activityId: "sleep:2", expiresAt: new Date(now + 7000) } }, history, { handoffLeaseSeconds: 30, now });
    expect(until).toMatchObject({ kind: "conclude", after: { wakeInSeconds: 7 } });
    const message = decide({ kind: "wait", wait: { kind: "message", activityId: "receive_x:1", channel: "x" } }, history, { handoffLeaseSeconds: 30, now });
    expect(message.kind).toBe("wait");
    const waiting = waitingPlan({ kind: "message", activityId: "receive_x:1", channel: "x" }, history, { kind: "waiting", wakeInSeconds: 12 }, now);
    expect(waiting).toMatchObject({ conclusion: { status: "waiting_for_message", currentActivityId: "receive_x:1" }, after: { wakeInSeconds: 12 } });
    expect(waitingPlan({ kind: "child", activityId: "invoke:1", childInstanceId: "c" }, history, { kind: "waiting", wakeInSeconds: null }, now).after).toEqual({});
  });
});
