/**
 * Running the activities a replay stopped at, and turning their outcomes into
 * the step's conclusion.
 *
 * Transactional activities run inside the step's transaction, so their writes,
 * the history record and the lease update commit together or not at all. A
 * lone activity runs directly in the transaction (a throw rolls everything
 * back and the failure is recorded by a second, single statement); several
 * activities of one tick each get a savepoint, so one failing does not undo
 * the others. Non-transactional activities run outside any transaction
 * (at-least-once) with a stable idempotency key.
 */
import type { ActivityContext, ActivityStream, Transaction } from "../core/context.ts";
import type { PendingActivity, WebhookLinks } from "../core/replay.ts";
import { attemptId, retryTimerId } from "../core/ids.ts";
import { EV, type Payload } from "../core/model.ts";
import { ActivityTimeoutError, RetryExhaustedError } from "../core/errors.ts";
import { backoffSeconds, nextRetry, resolveRetryPolicy, type RetryPolicy } from "../core/retry.ts";
import { serializeError, toJson, toPayload, toStoredJson, toStoredPayload } from "../core/serialization.ts";
import type { NewCompensation, NewHistoryEvent, Storage, TimerRegistration } from "../storage/types.ts";

/** What the start activity asks the engine for (children.ts; the step starts it through ActivityNotify.startChild). */
export interface ChildStart {
  workflowName: string;
  input: unknown;
  instanceId: string;
  /** The parent operation that waits for the outcome (`invoke`), or null (`startChild`). */
  parentActivityId: string | null;
  detached: boolean;
}

/** `data`: the result's history payload, encoded inside the attempt (see `settle`). */
export type ActivityOutcome = { ok: true; value: unknown; data?: Payload } | { ok: false; error: unknown };

export interface ExecutionTarget {
  instanceId: string;
  workflowName: string;
}

/** What Edda operations inside an activity (publish, outbox events) need from the engine. */
export interface ActivityInternals {
  /** Bound to the step transaction for transactional activities. */
  storage: Storage;
  /** Run after the step commits (immediately when there is no transaction). */
  afterCommit: (cb: () => void) => void;
  notify: ActivityNotify;
}

export interface ActivityNotify {
  published(channel: string): void;
  outbox(eventIds: string[]): void;
  /** Start a child workflow on `storage` (the step transaction); the engine's step provides it (children.ts). */
  startChild?(storage: Storage, start: ChildStart): Promise<string>;
  /** What the built-in `createWebhook` derives a per-wait URL's token from (EDDA_SECRET); none without a secret. */
  webhookLinks?: () => WebhookLinks | null;
  /** W3C traceparent of the running attempt's span (tracing on): outgoing events carry it. */
  traceparent?(activityId: string, attempt: number): string | null;
}

/** Kept beside the public context, never typed into it. */
const activityInternals = new WeakMap<object, ActivityInternals>();

export function isActivityContext(x: unknown): x is ActivityContext {
  return typeof x === "object" && x !== null && activityInternals.has(x);
}

/** The engine internals of an activity's context (publish, sendEventTransactional). */
export function activityInternalsOf(ctx: ActivityContext): ActivityInternals {
  const internals = activityInternals.get(ctx);
  if (!internals) throw new TypeError("not an activity context: pass the ctx your activity was called with");
  return internals;
}

export function makeActivityContext(
  target: ExecutionTarget,
  pending: PendingActivity,
  storage: Storage,
  tx: Transaction | null,
  notify: ActivityNotify,
  /** Where `ctx.signal` comes from, read when the activity asks for it (the step makes its AbortController then). */
  aborts: { readonly signal: AbortSignal },
  afterCommit?: (cb: () => void) => void,
  stream: ActivityStream = NO_STREAM,
): ActivityContext {
  const internals: ActivityInternals = { storage, notify, afterCommit: afterCommit ?? ((cb) => cb()) };
  const ctx: ActivityContext = {
    instanceId: target.instanceId,
    workflowName: target.workflowName,
    activityId: pending.activityId,
    attempt: pending.attempt,
    idempotencyKey: `${target.instanceId}:${pending.activityId}`,
    get signal() {
      return aborts.signal;
    },
    stream,
    get tx(): Transaction {
      if (!tx) throw new TypeError(`activity "${pending.activity.activityName}" is not transactional: ctx.tx is unavailable (use ctx.transaction())`);
      return tx;
    },
    transaction<T>(fn: (t: Transaction) => Promise<T>): Promise<T> {
      if (tx) return tx.transaction(fn as (t: unknown) => Promise<T>) as Promise<T>;
      return storage.executor.transaction(fn as (t: unknown) => Promise<T>) as Promise<T>;
    },
  };
  activityInternals.set(ctx, internals);
  return ctx;
}

/** The stream of a context made outside a step (no instance to stream to). */
const NO_STREAM: ActivityStream = {
  write() {
    throw new TypeError("ctx.stream is only available to an activity running in a step");
  },
  close: () => Promise.resolve(),
};

export async function invoke(pending: PendingActivity, ctx: ActivityContext): Promise<ActivityOutcome> {
  const limit = pending.activity.options.timeoutSeconds;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    if (limit === undefined) return settle(pending, await pending.activity.fn(ctx, ...pending.args));
    // Past the limit the attempt's outcome is a failure at once, its transaction rolls back with it
    // (whatever the function still does commits nothing), and `ctx.signal` aborts so a fetch stops.
    const abort = new AbortController();
    const attemptCtx = Object.create(ctx, { signal: { value: AbortSignal.any([ctx.signal, abort.signal]) } }) as ActivityContext;
    const run = (async () => pending.activity.fn(attemptCtx, ...pending.args))();
    run.catch(() => undefined);
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new ActivityTimeoutError(`activity "${pending.activity.activityName}" attempt ${pending.attempt} exceeded ${limit} s`);
        abort.abort(error);
        reject(error);
      }, limit * 1000);
    });
    return settle(pending, await Promise.race([run, expired]));
  } catch (error) {
    return { ok: false, error };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

/**
 * The attempt's result as it will be recorded, encoded while the attempt is still open: a value that
 * cannot be stored fails this attempt (its transaction rolls back) with an UnserializableValueError,
 * never retried, which the workflow can catch — instead of escaping the step after the body ran.
 */
function settle(pending: PendingActivity, value: unknown): ActivityOutcome {
  try {
    return { ok: true, value, data: resultPayload(pending, value) };
  } catch (error) {
    return { ok: false, error };
  }
}

function resultPayload(pending: PendingActivity, value: unknown): Payload {
  const name = pending.activity.activityName;
  if (value instanceof Uint8Array) return toPayload(value);
  const data = toStoredPayload({ name, result: value ?? null, ...(pending.attempt > 1 ? { attempts: pending.attempt } : {}) }, `the result of activity "${name}"`);
  // onFailure receives the result with the activity's arguments: both are stored with the compensation.
  if (pending.activity.options.onFailure) toStoredJson([value, ...pending.args], `the onFailure arguments of activity "${name}"`);
  return data;
}

export function isTransactional(p: PendingActivity): boolean {
  return p.activity.options.transactional !== false;
}

export interface RecordedOutcomes {
  history: NewHistoryEvent[];
  compensations: NewCompensation[];
  /** The earliest retry timer, when any attempt is to be retried. */
  retryTimer: TimerRegistration | null;
  events: { pending: PendingActivity; outcome: ActivityOutcome; retryInSeconds?: number; final: boolean }[];
}

/**
 * History rows for a set of activity outcomes. `kind` selects the event names:
 * workflow activities or saga compensations.
 */
export function recordOutcomes(
  results: { pending: PendingActivity; outcome: ActivityOutcome }[],
  appRetry: RetryPolicy | undefined,
  kind: "activity" | "compensation",
): RecordedOutcomes {
  const out: RecordedOutcomes = { history: [], compensations: [], retryTimer: null, events: [] };
  for (const { pending, outcome } of results) {
    const name = pending.activity.activityName;
    if (outcome.ok) {
      const data = outcome.data ?? resultPayload(pending, outcome.value);
      out.history.push({ activityId: pending.activityId, eventType: kind === "activity" ? EV.ActivityCompleted : EV.CompensationExecuted, data });
      const onFailure = pending.activity.options.onFailure;
      if (onFailure && kind === "activity") {
        out.compensations.push({ activityId: `onFailure:${pending.activityId}`, activityName: onFailure.activityName, args: toJson([outcome.value, ...pending.args]) });
      }
      out.events.push({ pending, outcome, final: true });
      continue;
    }
    const policy = resolveRetryPolicy(pending.activity.options.retry, appRetry);
    const err = serializeError(outcome.error);
    // maxDuration on one clock, the database's: from the first failed attempt's record to the latest one's,
    // plus the backoff that then had to pass before this attempt could start (never the process clock).
    const elapsed =
      pending.firstFailureAt && pending.lastFailureAt
        ? (pending.lastFailureAt.getTime() - pending.firstFailureAt.getTime()) / 1000 + backoffSeconds(policy, pending.attempt - 1)
        : 0;
    const decision = nextRetry(policy, pending.attempt, err.name, elapsed);
    if (decision.retry) {
      out.history.push({
        activityId: attemptId(pending.activityId, pending.attempt),
        eventType: EV.ActivityAttemptFailed,
        data: toPayload({ name, error: err, attempt: pending.attempt, retryInSeconds: decision.delaySeconds }),
      });
      const timerId = retryTimerId(pending.activityId, pending.attempt);
      if (!out.retryTimer || (out.retryTimer.delaySeconds ?? 0) > decision.delaySeconds) {
        out.retryTimer = { timerId, activityId: timerId, delaySeconds: decision.delaySeconds };
      }
      out.events.push({ pending, outcome, retryInSeconds: decision.delaySeconds, final: false });
      continue;
    }
    const finalError = decision.exhausted
      ? new RetryExhaustedError(`activity "${name}" failed after ${pending.attempt} attempt(s): ${err.message}`, pending.attempt, { cause: outcome.error })
      : outcome.error;
    out.history.push({
      activityId: pending.activityId,
      eventType: kind === "activity" ? EV.ActivityFailed : EV.CompensationFailed,
      data: toPayload({ name, error: serializeError(finalError), attempts: pending.attempt }),
    });
    out.events.push({ pending, outcome: { ok: false, error: finalError }, final: true });
  }
  return out;
}
