// decide.ts `phase`: the one rule that sends a step to the saga's compensations or to the workflow body
// (issue 34: a compensation's retry timer made the instance `running`, and the step replayed the body).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { INSTANCE_STATUSES } from "../../src/core/model.ts";
import { phase } from "../../src/engine/decide.ts";

const CANCEL = JSON.stringify({ cancelled_by: "api", cancelled_at: "2026-12-04T00:00:00.000Z", previous_status: "waiting_for_timer" });

describe("phase: compensations or body", () => {
  it("a compensation's retry timer that fired (running, compensate:…#n in history) continues the compensation", () => {
    const history = [{ activityId: "chaos_record:1" }, { activityId: "compensate:compensation:1#1" }, { activityId: "compensate:compensation:1#retry1" }];
    expect(phase({ status: "running", cancelData: null }, history)).toBe("compensating");
    expect(phase({ status: "running", cancelData: CANCEL }, history)).toBe("compensating");
  });

  it("a cancelled instance never resumes its body, even before any compensation is recorded", () => {
    expect(phase({ status: "running", cancelData: CANCEL }, [{ activityId: "a:1" }])).toBe("compensating");
  });

  it("a parked or resumed instance with an error but no compensation record resumes its body", () => {
    expect(phase({ status: "running", cancelData: null }, [{ activityId: "a:1" }, { activityId: "sleep:1" }])).toBe("body");
  });

  it("property: compensating exactly when the status says so, a cancel was recorded, or a compensation record exists", () => {
    const id = fc.oneof(fc.constantFrom("a:1", "sleep:1", "compensate:x:1", "compensate:x:1#2", "receive_jobs:1", "compensation:1"), fc.string());
    fc.assert(
      fc.property(fc.constantFrom(...INSTANCE_STATUSES), fc.boolean(), fc.array(id, { maxLength: 6 }), (status, cancelled, ids) => {
        const expected = status === "compensating" || cancelled || ids.some((i) => i.startsWith("compensate:"));
        expect(phase({ status, cancelData: cancelled ? CANCEL : null }, ids.map((activityId) => ({ activityId })))).toBe(expected ? "compensating" : "body");
      }),
    );
  });
});
