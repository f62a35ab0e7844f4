// Named regressions for smaller defects (pure, no database).
import { describe, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { recordOutcomes } from "../../src/engine/execute.ts";
import { guardHooks } from "../../src/engine/hooks.ts";
import { failedSoFar } from "../../src/core/replay.ts";
import { ActivityRegistry } from "../../src/core/registry.ts";
import { attemptRow } from "./history-event.ts";

describe("smaller defects", () => {
  it("a second activity with the same name and different code in one app is an error naming both (it silently replaced the first)", () => {
    const registry = new ActivityRegistry();
    registry.add(activity("dup_named", async () => "first version"));
    expect(() => registry.add(activity("dup_named", async () => "second version"))).toThrow(/"dup_named" is defined twice: first as async \(\) => "first version".*again as async \(\) => "second version"/);
    // The same code evaluated again (a module loaded twice) is accepted.
    expect(() => registry.add(activity("dup_named", async () => "first version"))).not.toThrow();
    // Another app's registry does not see this one's activities.
    expect(() => new ActivityRegistry().add(activity("dup_named", async () => "second version"))).not.toThrow();
  });

  it("retry maxDuration is measured on the database's clock only (it mixed the process clock with history timestamps)", () => {
    const flaky = activity("clock_flaky", async () => 1, { retry: { maxAttempts: 10, initialIntervalSeconds: 1, maxDurationSeconds: 30 } });
    // History timestamps from a database whose clock is years behind this process: irrelevant to the decision.
    const at = (s: number) => attemptRow(`clock_flaky:1#${s}`, new Date(Date.UTC(2001, 0, 1, 0, 0, s)));
    const decide = (failures: ReturnType<typeof at>[]) =>
      recordOutcomes([{ pending: failedSoFar("clock_flaky:1", flaky, [], failures), outcome: { ok: false, error: new Error("again") } }], undefined, "activity");
    expect(decide([at(0), at(3)]).retryTimer).not.toBeNull();
    // 25 s between the first and latest failure + the 4 s backoff + the next 8 s backoff > 30 s: exhausted.
    const out = decide([at(0), at(10), at(25)]);
    expect(out.retryTimer).toBeNull();
    expect(out.history[0]!.eventType).toBe("ActivityFailed");
  });

  it("async hook rejections are logged, never unhandled (they escaped as unhandled rejections)", async () => {
    const logged: string[] = [];
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    try {
      const hooks = guardHooks(
        {
          // A user may pass an async hook even though hooks are typed to return void.
          onWorkflowStart: (() => Promise.reject(new Error("async boom"))) as () => void,
          onWorkflowComplete: () => {
            throw new Error("sync boom");
          },
        },
        (m) => logged.push(m),
      );
      hooks.onWorkflowStart?.({ instanceId: "i", workflowName: "w", input: null });
      hooks.onWorkflowComplete?.({ instanceId: "i", workflowName: "w", output: null });
      await new Promise((r) => setTimeout(r, 20));
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
    expect(logged.sort()).toEqual(["edda: hook onWorkflowComplete failed", "edda: hook onWorkflowStart failed"]);
    expect(unhandled).toEqual([]);
  });

  it("a workflow name registered twice names both definitions", async () => {
    const { Engine } = await import("../../src/engine/engine.ts");
    const a = workflow("twice", async () => "a");
    const b = workflow("twice", async () => "b");
    expect(() => new Engine({ storage: {} as never, dispatcher: { attach() {}, dispatch() {} }, workflows: [a, b] })).toThrow(
      /workflow "twice" registered twice: first as async \(\) => "a".*again as async \(\) => "b"/,
    );
  });
});
