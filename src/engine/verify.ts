/**
 * Replay verification: run a workflow's current code against an instance's
 * recorded history, in memory, and say whether it still fits. Nothing is
 * executed (activities are only reached, never run) and nothing is written;
 * recorded values replay as recorded. `edda-edge verify-replay` runs it over
 * every in-flight instance before a deploy; the same divergence would park
 * the instance after the deploy.
 */
import type { Workflow } from "../core/definitions.ts";
import { createWorkflowContext } from "../core/operation.ts";
import { ReplayRun, ReplayState } from "../core/replay.ts";
import { fromJson, type ErrorClass } from "../core/serialization.ts";
import type { HistoryEvent, InstanceRecord } from "../storage/types.ts";

export type ReplayVerdict =
  | { ok: true; /** Where the replay stopped: the next thing the run would do. */ next: string }
  | { ok: false; error: string };

export async function verifyReplay(wf: Workflow, instance: InstanceRecord, history: HistoryEvent[], errorClasses: Record<string, ErrorClass> = {}): Promise<ReplayVerdict> {
  const state = new ReplayState(history, errorClasses);
  const ctx = createWorkflowContext(instance, state);
  const run = new ReplayRun(wf.fn as (c: never, i: unknown) => Promise<unknown>, fromJson(instance.inputData), state, ctx);
  const { outcome } = await run.next();
  switch (outcome.kind) {
    case "nondeterminism":
      return { ok: false, error: outcome.error.message };
    case "activities":
      return { ok: true, next: `run ${outcome.activities.map((a) => a.activityId).join(", ")}` };
    case "wait":
      return { ok: true, next: `wait ${outcome.wait.activityId}` };
    case "completed":
      return { ok: true, next: "complete" };
    case "failed":
      return { ok: true, next: "fail" };
    case "recur":
      return { ok: true, next: "recur" };
  }
}
