// The wait table's conclusions (engine/wait-kinds.ts WAIT_HANDLERS[kind].conclude),
// pure: for each declared kind, the waiting conclusion a step commits — the
// kind's status at the wait's id, the run's rows carried with it, what is
// registered beside it — and when the process wakes the instance itself
// (null: only an outside event or the sweep does). The declaration-derived
// lists are checked in test/core/wait-kinds.test.ts.
import { describe, expect, it } from "vitest";
import { EV, WAIT_KINDS } from "../../src/core/model.ts";
import type { WaitRequest } from "../../src/core/replay.ts";
import { waitingPlan, type StepHistory } from "../../src/engine/decide.ts";
import { WAIT_HANDLERS, waitKind } from "../../src/engine/wait-kinds.ts";

const NOW = Date.parse("2026-12-04T12:00:00Z");
const rows = {
  history: [{ activityId: "note:1", eventType: EV.ActivityCompleted, data: { kind: "json", text: "1" } as never }],
  compensations: [{ activityId: "undo:1", activityName: "undo", args: "[]" }],
};
const history: StepHistory = { records: rows.history, compensations: rows.compensations };
const waiting = (wakeInSeconds: number | null) => ({ kind: "waiting" as const, wakeInSeconds });
const conclude = (w: WaitRequest, wake: number | null = null) => waitKind(w).conclude(w as never, rows, waiting(wake), NOW);

describe("wait conclusions", () => {
  it("every kind concludes in its declared status at the wait's id, carrying the run's rows, releasing the lease", () => {
    const waits: WaitRequest[] = [
      { kind: "timer", activityId: "sleep:1", delaySeconds: 3 },
      { kind: "message", activityId: "receive_jobs:1", channel: "jobs" },
      { kind: "child", activityId: "invoke:1", childInstanceId: "c-1" },
      { kind: "webhook", activityId: "webhook:1:wait", hookId: "webhook:1", run: 0 },
    ];
    expect(waits.map((w) => w.kind)).toEqual(Object.keys(WAIT_HANDLERS));
    for (const w of waits) {
      const { conclusion } = conclude(w);
      expect(conclusion, w.kind).toMatchObject({ status: WAIT_KINDS[w.kind].status, currentActivityId: w.activityId, ...rows });
      expect(conclusion.handoff, w.kind).toBeUndefined();
      expect(waitingPlan(w, history, waiting(null), NOW).conclusion, w.kind).toEqual(conclusion);
    }
  });

  it("timer: registered at its id with the delay or the absolute time; the in-process wake-up is the time left, never negative", () => {
    expect(conclude({ kind: "timer", activityId: "sleep:1", delaySeconds: 90 })).toEqual({
      conclusion: expect.objectContaining({ timer: { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: 90 } }),
      wakeInSeconds: 90,
    });
    const at = new Date(NOW + 2500);
    expect(conclude({ kind: "timer", activityId: "sleep_until:1", expiresAt: at })).toEqual({
      conclusion: expect.objectContaining({ timer: { timerId: "sleep_until:1", activityId: "sleep_until:1", expiresAt: at } }),
      wakeInSeconds: 2.5,
    });
    expect(conclude({ kind: "timer", activityId: "sleep_until:2", expiresAt: new Date(NOW - 60_000) }).wakeInSeconds).toBe(0);
    expect(conclude({ kind: "timer", activityId: "sleep:2" }).conclusion.timer).toMatchObject({ delaySeconds: 0 });
  });

  it("message: nothing registered with the conclusion (prepare did it); woken at the timeout prepare computed", () => {
    const { conclusion, wakeInSeconds } = conclude({ kind: "message", activityId: "receive_jobs:1", channel: "jobs", timeoutSeconds: 600 }, 42);
    expect(conclusion.timer).toBeUndefined();
    expect(wakeInSeconds).toBe(42);
    expect(conclude({ kind: "message", activityId: "receive_jobs:2", channel: "jobs" }).wakeInSeconds).toBeNull();
  });

  it("child: never woken in-process — the child's end records the outcome", () => {
    const { conclusion, wakeInSeconds } = conclude({ kind: "child", activityId: "invoke:1", childInstanceId: "c-1" }, 5);
    expect(wakeInSeconds).toBeNull();
    expect(conclusion.timer).toBeUndefined();
  });

  it("webhook: a race's timer registered at the race's id; woken at the earlier of the hook's expiry and that timer", () => {
    const hook = { kind: "webhook" as const, activityId: "race:1", hookId: "webhook:1", run: 0 };
    expect(conclude(hook, 3600)).toEqual({ conclusion: expect.not.objectContaining({ timer: expect.anything() }), wakeInSeconds: 3600 });
    const raced = conclude({ ...hook, timer: { delaySeconds: 60 } }, 3600);
    expect(raced.conclusion.timer).toEqual({ timerId: "race:1", activityId: "race:1", delaySeconds: 60 });
    expect(raced.wakeInSeconds).toBe(60);
    expect(conclude({ ...hook, timer: { delaySeconds: 60 } }, 10).wakeInSeconds).toBe(10);
    expect(conclude({ ...hook, timer: { expiresAt: new Date(NOW + 30_000) } }, null).wakeInSeconds).toBe(30);
  });

});
