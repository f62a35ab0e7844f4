/**
 * Workflow-side operations that are not activities: durable timers and saga
 * compensation registration. Each gets a deterministic id and either returns
 * its recorded outcome or suspends the workflow at the step boundary.
 */
import type { Activity } from "./definitions.ts";
import type { WorkflowContext } from "./context.ts";
import { EV, replayStateOf, requestWait } from "./replay.ts";
import { NonDeterminismError } from "./errors.ts";

/** Sleep durably for `seconds` (no worker is held; the timer's expiry is fixed when first registered). */
export function sleep(ctx: WorkflowContext, seconds: number, opts: { id?: string } = {}): Promise<void> {
  if (!(Number.isFinite(seconds) && seconds >= 0)) throw new TypeError(`sleep: seconds must be a finite number ≥ 0, got ${seconds}`);
  const state = replayStateOf(ctx);
  const id = opts.id ?? state.nextId("sleep");
  return timerWait(ctx, id, { delaySeconds: seconds });
}

/** Sleep durably until `until`. */
export function sleepUntil(ctx: WorkflowContext, until: Date, opts: { id?: string } = {}): Promise<void> {
  if (!(until instanceof Date) || Number.isNaN(until.getTime())) throw new TypeError("sleepUntil: a valid Date is required");
  const state = replayStateOf(ctx);
  const id = opts.id ?? state.nextId("sleep_until");
  return timerWait(ctx, id, { expiresAt: until });
}

function timerWait(ctx: WorkflowContext, id: string, when: { delaySeconds?: number; expiresAt?: Date }): Promise<void> {
  const state = replayStateOf(ctx);
  const ev = state.take(id);
  if (ev) {
    if (ev.eventType === EV.TimerExpired) return Promise.resolve();
    state.fatal ??= new NonDeterminismError(`timer id ${id} holds a ${ev.eventType} record`);
    return state.suspend();
  }
  if (!state.checkNewOperation(id, "a timer")) return state.suspend();
  return requestWait(state, { kind: "timer", activityId: id, ...when });
}

/**
 * Register a compensation (saga): if the workflow later fails or is cancelled,
 * registered compensations run newest first, each once, as durable steps.
 */
export function registerCompensation<A extends unknown[]>(ctx: WorkflowContext, compensation: Activity<A, unknown>, ...args: A): Promise<void> {
  const state = replayStateOf(ctx);
  const id = state.nextId("compensation");
  // Registrations made while replaying were persisted by an earlier step.
  if (!state.isReplaying) state.newCompensations.push({ activityId: id, activityName: compensation.activityName, args });
  return Promise.resolve();
}
