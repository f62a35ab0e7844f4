/**
 * Deterministic replay. A workflow function runs from the top against its
 * history: every Edda operation gets a deterministic id (`name:n`, `sleep:n`,
 * …); recorded outcomes are returned (errors re-thrown as their original
 * class); the first operation with no record *suspends* the function.
 *
 * Suspension returns a promise that never settles, so no user `try/catch` can
 * swallow it and no code after it runs. Operations invoked in the same tick
 * (`Promise.all`) all register before the engine looks: the engine waits one
 * macrotask after the first suspension, by which time every microtask — every
 * replayed `await` — has drained.
 *
 * Pure: no I/O. The engine turns a `ReplayOutcome` into database writes.
 */
import type { Activity } from "./definitions.ts";
import type { WorkflowContext } from "./context.ts";
import { REPLAY } from "./context.ts";
import { NonDeterminismError } from "./errors.ts";
import { deserializeError, fromPayload, type ErrorClass, type SerializedError } from "./serialization.ts";
import type { ChannelMode, HistoryEvent } from "../storage/types.ts";

export const EV = {
  ActivityCompleted: "ActivityCompleted",
  ActivityFailed: "ActivityFailed",
  ActivityAttemptFailed: "ActivityAttemptFailed",
  TimerExpired: "TimerExpired",
  MessageReceived: "MessageReceived",
  MessageTimeout: "MessageTimeout",
  CompensationExecuted: "CompensationExecuted",
  CompensationFailed: "CompensationFailed",
} as const;

/** History rows that a replayed operation consumes, in call order. */
const PRIMARY = new Set<string>([EV.ActivityCompleted, EV.ActivityFailed, EV.TimerExpired, EV.MessageReceived, EV.MessageTimeout]);

export interface PendingActivity {
  activityId: string;
  activity: Activity;
  args: unknown[];
  /** 1-based attempt about to run. */
  attempt: number;
  /** When the first failed attempt was recorded (for maxDuration). */
  firstFailureAt: Date | null;
}

export interface CompensationRegistration {
  activityId: string;
  activityName: string;
  args: unknown[];
}

/** A wait the workflow is blocked on; issued by the waiting primitives. */
export type WaitRequest =
  | { kind: "timer"; activityId: string; delaySeconds?: number; expiresAt?: Date }
  | { kind: "message"; activityId: string; channel: string; timeoutSeconds?: number; subscribeAs?: ChannelMode; event?: boolean };

export type ReplayOutcome =
  | { kind: "completed"; output: unknown }
  | { kind: "failed"; error: unknown }
  | { kind: "activities"; activities: PendingActivity[] }
  | { kind: "wait"; wait: WaitRequest }
  | { kind: "recur"; input: unknown }
  | { kind: "nondeterminism"; error: NonDeterminismError };

export interface ReplayResult {
  outcome: ReplayOutcome;
  /** Compensations registered after the last recorded event (to persist now). */
  newCompensations: CompensationRegistration[];
}

interface Recorded {
  event: HistoryEvent;
  consumed: boolean;
}

export class ReplayState {
  readonly records = new Map<string, Recorded>();
  private readonly primaryOrder: string[] = [];
  private consumedPrimary = 0;
  private readonly counters = new Map<string, number>();
  readonly pending: PendingActivity[] = [];
  wait: WaitRequest | null = null;
  recurInput: { input: unknown } | null = null;
  fatal: NonDeterminismError | null = null;
  readonly newCompensations: CompensationRegistration[] = [];
  private suspendResolve: (() => void) | null = null;
  readonly suspended: Promise<void>;

  constructor(
    history: HistoryEvent[],
    readonly errorClasses: Record<string, ErrorClass>,
  ) {
    for (const event of history) {
      this.records.set(event.activityId, { event, consumed: false });
      // `id#n` rows (failed attempts, retry timers) belong to the operation at `id`.
      if (PRIMARY.has(event.eventType) && !event.activityId.includes("#")) this.primaryOrder.push(event.activityId);
    }
    this.suspended = new Promise((resolve) => (this.suspendResolve = resolve));
  }

  get isReplaying(): boolean {
    return this.consumedPrimary < this.primaryOrder.length;
  }

  nextId(prefix: string): string {
    const n = (this.counters.get(prefix) ?? 0) + 1;
    this.counters.set(prefix, n);
    return `${prefix}:${n}`;
  }

  /** The recorded primary event at `id`, marked consumed; null when none. */
  take(id: string): HistoryEvent | null {
    const rec = this.records.get(id);
    if (!rec || !PRIMARY.has(rec.event.eventType) || id.includes("#")) return null;
    if (!rec.consumed) {
      rec.consumed = true;
      this.consumedPrimary++;
    }
    return rec.event;
  }

  /** Attempt-failure rows recorded for an activity id. */
  failedAttempts(id: string): HistoryEvent[] {
    const out: HistoryEvent[] = [];
    for (let n = 1; ; n++) {
      const rec = this.records.get(`${id}#${n}`);
      if (!rec) return out;
      out.push(rec.event);
    }
  }

  /**
   * Called when an operation has no record. If recorded events remain
   * unconsumed, the code took a different path than the history: fatal.
   */
  checkNewOperation(id: string, what: string): boolean {
    if (!this.isReplaying) return true;
    const expected = this.primaryOrder.find((pid) => !this.records.get(pid)!.consumed);
    this.fatal ??= new NonDeterminismError(
      `history expects ${describeRecorded(this.records.get(expected!)!.event)} next, but the code called ${what} (${id})`,
    );
    return false;
  }

  /** Stop the workflow function here: a promise that never settles. */
  suspend<T>(): Promise<T> {
    const resolve = this.suspendResolve;
    if (resolve) {
      this.suspendResolve = null;
      setTimeout(resolve, 0);
    }
    return new Promise<T>(() => {});
  }

  restoreError(s: SerializedError): Error {
    return deserializeError(s, this.errorClasses);
  }
}

function describeRecorded(ev: HistoryEvent): string {
  const name = ev.data.type === "json" ? (safeParse(ev.data.json) as { name?: string } | null)?.name : undefined;
  return `${ev.eventType}${name ? ` of "${name}"` : ""} at ${ev.activityId}`;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export function replayStateOf(ctx: WorkflowContext): ReplayState {
  const state = (ctx as { [REPLAY]?: ReplayState })[REPLAY];
  if (!state) throw new TypeError("not a workflow context: Edda operations must be called with the workflow's ctx");
  return state;
}

/** `await act(ctx, ...args)` inside a workflow. */
export function callActivity<A extends unknown[], R>(ctx: WorkflowContext, def: Activity<A, R>, args: A, explicitId?: string): Promise<R> {
  const state = replayStateOf(ctx);
  const id = explicitId ?? state.nextId(def.activityName);
  const ev = state.take(id);
  if (ev) {
    const recordedName = recordedActivityName(ev);
    if (recordedName !== undefined && recordedName !== def.activityName) {
      state.fatal ??= new NonDeterminismError(
        `activity id ${id} recorded "${recordedName}" but the code now calls "${def.activityName}"`,
      );
      return state.suspend();
    }
    if (ev.eventType === EV.ActivityCompleted) {
      if (ev.data.type === "binary") return Promise.resolve(ev.data.bytes as R);
      return Promise.resolve((fromPayload(ev.data) as { result: R }).result);
    }
    if (ev.eventType === EV.ActivityFailed) {
      const { error } = fromPayload(ev.data) as { error: SerializedError };
      return Promise.reject(state.restoreError(error));
    }
    state.fatal ??= new NonDeterminismError(`activity id ${id} holds a ${ev.eventType} record, not an activity result`);
    return state.suspend();
  }
  if (!state.checkNewOperation(id, `activity "${def.activityName}"`)) return state.suspend();
  const failures = state.failedAttempts(id);
  state.pending.push({
    activityId: id,
    activity: def as unknown as Activity,
    args,
    attempt: failures.length + 1,
    firstFailureAt: failures[0]?.createdAt ?? null,
  });
  return state.suspend();
}

function recordedActivityName(ev: HistoryEvent): string | undefined {
  if (ev.data.type !== "json") return undefined;
  const v = safeParse(ev.data.json) as { name?: unknown } | null;
  return typeof v?.name === "string" ? v.name : undefined;
}

/** Register a wait (sleep, receive…). Only the first wait of a tick is taken; the rest re-register next step. */
export function requestWait(state: ReplayState, wait: WaitRequest): Promise<never> {
  state.wait ??= wait;
  return state.suspend();
}

/**
 * Run the workflow function against its history and report where it stopped.
 * `makeContext` builds the user-facing context around the replay state.
 */
export async function replay(
  fn: (ctx: WorkflowContext, input: unknown) => Promise<unknown>,
  input: unknown,
  state: ReplayState,
  ctx: WorkflowContext,
): Promise<ReplayResult> {
  let settled: { ok: true; value: unknown } | { ok: false; error: unknown } | null = null;
  const run = (async () => fn(ctx, input))().then(
    (value) => (settled = { ok: true, value }),
    (error: unknown) => (settled = { ok: false, error }),
  );
  // A workflow that neither settles nor suspends within one macrotask is
  // awaiting something that is not an Edda operation (I/O in workflow code).
  const watchdog = new Promise<"stuck">((resolve) => setTimeout(() => resolve("stuck"), 0));
  await Promise.race([run, state.suspended, watchdog]);
  const newCompensations = state.newCompensations;
  const s = settled as { ok: true; value: unknown } | { ok: false; error: unknown } | null;

  if (state.fatal) return { outcome: { kind: "nondeterminism", error: state.fatal }, newCompensations };
  if (state.recurInput) return { outcome: { kind: "recur", input: state.recurInput.input }, newCompensations };
  if (state.pending.length) return { outcome: { kind: "activities", activities: state.pending }, newCompensations };
  if (state.wait) return { outcome: { kind: "wait", wait: state.wait }, newCompensations };
  if (s?.ok) return { outcome: { kind: "completed", output: s.value }, newCompensations };
  if (s && !s.ok) return { outcome: { kind: "failed", error: s.error }, newCompensations };
  return {
    outcome: {
      kind: "nondeterminism",
      error: new NonDeterminismError("the workflow awaited something that is not an Edda operation; do I/O in activities"),
    },
    newCompensations,
  };
}
