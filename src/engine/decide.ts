/**
 * The step's decision, pure: where the replay stopped (or what this tick's
 * activities returned) plus the facts the step already holds → a plan of what
 * the fenced conclusion writes and what runs after its commit.
 *
 *   lease → replay → decide → conclude → dispatch
 *
 * No I/O and no clock of its own (the caller passes `now`): the step
 * (step.ts) carries a plan out against the database, and the pure stepper of
 * the property suite (test/core/stepper.ts) carries the same plans out over a
 * simulated store — so the rule "what a step writes for this outcome" exists
 * once, and the warm ≡ cold properties run against it.
 *
 * A plan either concludes the step, or names the one piece of I/O the step
 * must do before it can conclude (run activities, register a wait that has to
 * look at the database first, recur, park with the deployed code's hash).
 */
import { NonDeterminismError, UnserializableValueError } from "../core/errors.ts";
import { COMPENSATION_PREFIX, WAIT_KINDS } from "../core/model.ts";
import type { CompensationRegistration, PendingActivity, ReplayOutcome, ReplayResult, WaitRequest } from "../core/replay.ts";
import type { RetryPolicy } from "../core/retry.ts";
import { instanceErrorData, toJson, toStoredJson } from "../core/serialization.ts";
import type { NewCompensation, NewHistoryEvent, StepConclusion } from "../storage/types.ts";
import { recordOutcomes, type ActivityOutcome, type RecordedOutcomes } from "./execute.ts";
import { waitKind, type Waiting } from "./wait-kinds.ts";

/** What a step got to decide on: a keyed union, each kind handled in `decide` (checked by the compiler). */
export type StepOutcome =
  | ReplayOutcome
  /** The activities of a tick ran (workflow activities, or one saga compensation). */
  | { kind: "settled"; results: { pending: PendingActivity; outcome: ActivityOutcome }[]; as: "activity" | "compensation"; currentActivityId: string }
  /** An instance in `compensating`: the registered compensations (newest first) and the ids history holds. */
  | { kind: "compensating"; registered: NewCompensation[]; recorded: ReadonlySet<string>; cancelled: boolean; errorData: string | null };

/** The rows this step produced before deciding: values the run recorded and compensations it registered. */
export interface StepHistory {
  records: NewHistoryEvent[];
  compensations: NewCompensation[];
}

export interface DecideOptions {
  /** The lease a follow-up step is handed. */
  handoffLeaseSeconds: number;
  retryPolicy?: RetryPolicy | undefined;
  /** Compensations stored by earlier steps (read only when `needsStoredCompensations` says so). */
  hasStoredCompensations?: boolean;
  /** The caller's clock (ms), for wake-ups at an absolute time. */
  now: number;
}

/** What runs after the commit: hooks, in-process wake-ups, a log line. Data, so the stepper can read it too. */
export interface AfterCommit {
  /** Activity hooks, in order (recordOutcomes' events). */
  activities?: RecordedOutcomes["events"];
  wakeInSeconds?: number;
  workflow?: { kind: "completed"; output: unknown } | { kind: "failed"; error: unknown } | { kind: "cancelled" };
  warn?: string;
}

export type StepPlan =
  | { kind: "conclude"; conclusion: StepConclusion; after: AfterCommit }
  /** Run these activities, then decide again on `settled`. */
  | { kind: "run"; activities: PendingActivity[]; as: "activity"; history: StepHistory }
  /** Run the saga's next compensation (its definition resolved by name), then decide on `settled`. */
  | { kind: "compensate"; activityId: string; compensation: NewCompensation }
  /** A wait whose kind prepares it against the database first (wait-kinds.ts), then `waitingPlan` or `continueWith`. */
  | { kind: "wait"; wait: WaitRequest; history: StepHistory }
  /** Start the next run; `history` holds what this step recorded before `ctx.recur` (its emits reach the stream first). */
  | { kind: "recur"; input: unknown; history: StepHistory }
  /** Replay diverged: park with the deployed code's source hash (`parkConclusion`). */
  | { kind: "park"; error: NonDeterminismError };

type ConcludePlan = Extract<StepPlan, { kind: "conclude" }>;

/** Settled activities always conclude (a retry timer, or a hand-off to the follow-up). */
export function decide(outcome: Extract<StepOutcome, { kind: "settled" }>, history: StepHistory, options: DecideOptions): ConcludePlan;
export function decide(outcome: StepOutcome, history: StepHistory, options: DecideOptions): StepPlan;
export function decide(outcome: StepOutcome, history: StepHistory, options: DecideOptions): StepPlan {
  const { records, compensations } = history;
  switch (outcome.kind) {
    case "completed": {
      // An output that cannot be stored fails the run (once, with the typed error), like any failure.
      const outputData = storedOutput(outcome);
      if (typeof outputData !== "string") return decide({ kind: "failed", error: outputData }, history, options);
      return conclude({ status: "completed", currentActivityId: null, history: records, outputData }, { workflow: { kind: "completed", output: outcome.output } });
    }
    case "failed": {
      const errorData = instanceErrorData(outcome.error);
      const compensate = (compensations.length > 0 || options.hasStoredCompensations === true) && !(outcome.error instanceof NonDeterminismError);
      if (compensate) {
        return conclude({ status: "compensating", currentActivityId: null, history: records, errorData, compensations, handoff: { leaseSeconds: options.handoffLeaseSeconds } }, {});
      }
      return conclude({ status: "failed", currentActivityId: null, history: records, errorData, compensations }, { workflow: { kind: "failed", error: outcome.error } });
    }
    case "nondeterminism":
      // Values recorded before the divergence are dropped with it: the fixed code records its own.
      return { kind: "park", error: outcome.error };
    case "recur":
      return { kind: "recur", input: outcome.input, history };
    case "activities":
      return { kind: "run", activities: outcome.activities, as: "activity", history };
    case "wait": {
      const w = outcome.wait;
      // A wait with nothing to look at first (a timer) concludes with one statement; the others prepare in a transaction.
      if (waitKind(w).prepare !== null) return { kind: "wait", wait: w, history };
      return waitingPlan(w, history, { kind: "waiting", wakeInSeconds: null }, options.now);
    }
    case "settled": {
      const rec = recordOutcomes(outcome.results, options.retryPolicy, outcome.as);
      const conclusion: StepConclusion = {
        status: rec.retryTimer ? WAIT_KINDS.timer.status : outcome.as === "compensation" ? "compensating" : "running",
        currentActivityId: outcome.currentActivityId,
        history: [...records, ...rec.history],
        compensations: [...compensations, ...rec.compensations],
        ...(rec.retryTimer ? { timer: rec.retryTimer } : { handoff: { leaseSeconds: options.handoffLeaseSeconds } }),
      };
      return conclude(conclusion, { activities: rec.events, ...(rec.retryTimer ? { wakeInSeconds: rec.retryTimer.delaySeconds ?? 0 } : {}) });
    }
    case "compensating": {
      const next = outcome.registered.find((c) => !outcome.recorded.has(COMPENSATION_PREFIX + c.activityId));
      if (next) return { kind: "compensate", activityId: COMPENSATION_PREFIX + next.activityId, compensation: next };
      if (outcome.cancelled) return conclude({ status: "cancelled", currentActivityId: null }, { workflow: { kind: "cancelled" } });
      return conclude({ status: "failed", currentActivityId: null }, { workflow: { kind: "failed", error: outcome.errorData ? JSON.parse(outcome.errorData) : null } });
    }
  }
}

/**
 * What a step of this instance continues: the saga's compensations or the
 * workflow body. The one place this is decided, whatever woke the instance
 * (a follow-up, a compensation's retry timer firing, a message, a child's end,
 * a webhook, a lease taken over, the sweep, an operator's resume): once a
 * cancel, a deadline or a failure turned the instance to its compensations,
 * no step replays the body again.
 *
 * Compensating when the status says so, or the instance was cancelled (a
 * cancel sets `cancel_data` and nothing clears it; a cancelled instance's body
 * never runs again), or history holds a compensation's record: a compensation
 * attempt that failed retryably concludes waiting for a timer, and its timer
 * firing makes the instance `running` — its `compensate:…#n` record is what
 * tells it apart from a body's timer. `error_data` alone would not do: a
 * parked instance carries one too, with a body to resume.
 */
export function phase(instance: { status: string; cancelData: string | null }, history: readonly { activityId: string }[]): "compensating" | "body" {
  if (instance.status === "compensating" || instance.cancelData !== null) return "compensating";
  return history.some((h) => h.activityId.startsWith(COMPENSATION_PREFIX)) ? "compensating" : "body";
}

/**
 * Whether `decide` needs `hasStoredCompensations` for this outcome: only a
 * failure with no compensation registered in this step (one read, on that path alone).
 */
export function needsStoredCompensations(outcome: StepOutcome, history: StepHistory): boolean {
  if (history.compensations.length > 0) return false;
  if (outcome.kind === "completed") return typeof storedOutput(outcome) !== "string";
  return outcome.kind === "failed" && !(outcome.error instanceof NonDeterminismError);
}

/** Encoded once per outcome: `needsStoredCompensations` and `decide` both ask. */
const encodedOutputs = new WeakMap<object, string | UnserializableValueError>();

/** A completed run's output as stored, or the error that fails the run when it cannot be stored. */
function storedOutput(outcome: { output: unknown }): string | UnserializableValueError {
  let encoded = encodedOutputs.get(outcome);
  if (encoded === undefined) {
    try {
      encoded = toStoredJson(outcome.output, "the workflow's output");
    } catch (err) {
      if (!(err instanceof UnserializableValueError)) throw err;
      encoded = err;
    }
    encodedOutputs.set(outcome, encoded);
  }
  return encoded;
}

/**
 * A settled tick whose run went on in memory (the look-ahead): compensations
 * registered right after the activity are persisted in the same commit as its
 * result, and a workflow that returned completes in this step instead of the next.
 */
export function withLookAhead(plan: ConcludePlan, ahead: ReplayResult | null): ConcludePlan {
  if (!ahead) return plan;
  const c = plan.conclusion;
  let conclusion: StepConclusion = {
    ...c,
    history: [...(c.history ?? []), ...ahead.newEvents],
    compensations: [...(c.compensations ?? []), ...compensationRows(ahead.newCompensations)],
  };
  if (ahead.outcome.kind !== "completed") return { ...plan, conclusion };
  const { output } = ahead.outcome;
  // An output that cannot be stored is left to the follow-up step: it replays to it and fails the run (decide).
  const outputData = storedOutput(ahead.outcome);
  if (typeof outputData !== "string") return { ...plan, conclusion };
  conclusion = { ...conclusion, status: "completed", currentActivityId: null, outputData };
  delete conclusion.handoff;
  return { kind: "conclude", conclusion, after: { ...plan.after, workflow: { kind: "completed", output } } };
}

/** The conclusion of a parked instance: nothing recorded, nothing compensated, the diverging code's hash kept. */
export function parkConclusion(error: NonDeterminismError, currentActivityId: string | null, parkedHash: string): ConcludePlan {
  return conclude({ status: "parked", currentActivityId, errorData: instanceErrorData(error), parkedHash }, { warn: `parked: ${error.message}` });
}

/** The conclusion of a step that waits: the wait kind's own (wait-kinds.ts), and its wake-up after the commit. */
export function waitingPlan(w: WaitRequest, history: StepHistory, waiting: Waiting, now: number): ConcludePlan {
  const { conclusion, wakeInSeconds } = waitKind(w).conclude(w, { history: history.records, compensations: history.compensations }, waiting, now);
  return conclude(conclusion, wakeInSeconds === null ? {} : { wakeInSeconds });
}

/** A wait whose outcome is already recorded (a queued message taken, a finished child): hand the lease to a follow-up. */
export function continueWith(activityId: string, history: StepHistory, record: NewHistoryEvent, options: Pick<DecideOptions, "handoffLeaseSeconds">): ConcludePlan {
  return conclude(
    { status: "running", currentActivityId: activityId, history: [...history.records, record], compensations: history.compensations, handoff: { leaseSeconds: options.handoffLeaseSeconds } },
    {},
  );
}

export function compensationRows(regs: CompensationRegistration[]): NewCompensation[] {
  return regs.map((c) => ({ activityId: c.activityId, activityName: c.activityName, args: toJson(c.args) }));
}

function conclude(conclusion: StepConclusion, after: AfterCommit): ConcludePlan {
  return { kind: "conclude", conclusion, after };
}
