/**
 * Workflow-side operations that are not activities: durable timers and saga
 * compensation registration. Both go through the operation protocol
 * (operation.ts): a deterministic id, the recorded outcome on replay, a wait
 * or a registration at the step boundary otherwise.
 */
import type { Activity } from "./definitions.ts";
import type { WorkflowContext } from "./context.ts";
import { EV, type HistoryEvent } from "./model.ts";
import { operation, operationId, replayStateOf } from "./operation.ts";
import type { Decoded } from "./replay.ts";
import { toStoredJson } from "./serialization.ts";

const timerRecord = (ev: HistoryEvent): Decoded => (ev.eventType === EV.TimerExpired ? { ok: true, value: undefined } : { mismatch: `holds a ${ev.eventType} record` });

/** Sleep durably for `seconds` (no worker is held; the timer's expiry is fixed when first registered). */
export function sleep(ctx: WorkflowContext, seconds: number, opts: { id?: string } = {}): Promise<void> {
  if (!(Number.isFinite(seconds) && seconds >= 0)) throw new TypeError(`sleep: seconds must be a finite number ≥ 0, got ${seconds}`);
  const id = operationId(ctx, "sleep", opts.id);
  return operation(ctx, { id, describe: "a timer", request: { kind: "wait", wait: { kind: "timer", activityId: id, delaySeconds: seconds } }, decode: timerRecord });
}

/** Sleep durably until `until`. */
export function sleepUntil(ctx: WorkflowContext, until: Date, opts: { id?: string } = {}): Promise<void> {
  if (!(until instanceof Date) || Number.isNaN(until.getTime())) throw new TypeError("sleepUntil: a valid Date is required");
  const id = operationId(ctx, "sleep_until", opts.id);
  return operation(ctx, { id, describe: "a timer", request: { kind: "wait", wait: { kind: "timer", activityId: id, expiresAt: until } }, decode: timerRecord });
}

/**
 * Register a compensation (saga): if the workflow later fails or is cancelled,
 * registered compensations run newest first, each once, as durable steps.
 * It has no history record of its own: it takes its id in call order and is
 * persisted (idempotently, by id) with the step that reaches it.
 */
export function registerCompensation<A extends unknown[]>(ctx: WorkflowContext, compensation: Activity<A, unknown>, ...args: A): Promise<void> {
  const state = replayStateOf(ctx);
  const id = operationId(ctx, "compensation");
  state.uses(compensation as unknown as Activity);
  // Arguments the compensation row cannot hold fail the registration itself (catchable), in the live run
  // and in every replay alike, instead of the step that would store them.
  try {
    toStoredJson(args, `the arguments of compensation "${compensation.activityName}"`);
  } catch (err) {
    return Promise.reject(err as Error);
  }
  if (!state.claim(id, { describe: `compensation "${compensation.activityName}"` })) return new Promise(() => {});
  // Registrations made while replaying were persisted by an earlier step.
  if (!state.isReplaying) state.newCompensations.push({ activityId: id, activityName: compensation.activityName, args });
  return Promise.resolve();
}
