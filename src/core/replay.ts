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
  /** Settles the suspended call when the run continues in memory (look-ahead). */
  settle?: Settle;
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

export interface Settle {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** After every queued microtask has run: setImmediate where the runtime has it (Node, Deno), else setTimeout(0). */
export function nextMacrotask(fn: () => void): void {
  const si = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate;
  if (si) si(fn);
  else setTimeout(fn, 0);
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
  private quiet: { promise: Promise<void>; resolve: (() => void) | null } = ReplayState.signal();

  constructor(
    history: HistoryEvent[],
    readonly errorClasses: Record<string, ErrorClass>,
  ) {
    for (const event of history) {
      this.records.set(event.activityId, { event, consumed: false });
      // `id#n` rows (failed attempts, retry timers) belong to the operation at `id`.
      if (PRIMARY.has(event.eventType) && !event.activityId.includes("#")) this.primaryOrder.push(event.activityId);
    }
  }

  private static signal(): { promise: Promise<void>; resolve: (() => void) | null } {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  }

  /** Resolves one macrotask after the first suspension since the last `rearm()`. */
  get suspended(): Promise<void> {
    return this.quiet.promise;
  }

  /** Before resuming suspended operations: wait for the next suspension afresh. */
  rearm(): void {
    this.quiet = ReplayState.signal();
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

  /**
   * Stop the workflow function here: a promise that user code can neither
   * settle nor catch. Only the engine may settle it (`settle`), and only with
   * exactly what a replay would return, to continue a run in memory.
   */
  suspend<T>(settle?: (s: Settle) => void): Promise<T> {
    const resolve = this.quiet.resolve;
    if (resolve) {
      this.quiet.resolve = null;
      nextMacrotask(resolve);
    }
    return new Promise<T>((res, rej) => settle?.({ resolve: res as (v: unknown) => void, reject: rej }));
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
  if (ev) return recordedOutcome(state, ev, id, def.activityName) as Promise<R>;
  if (!state.checkNewOperation(id, `activity "${def.activityName}"`)) return state.suspend();
  const failures = state.failedAttempts(id);
  const entry: PendingActivity = {
    activityId: id,
    activity: def as unknown as Activity,
    args,
    attempt: failures.length + 1,
    firstFailureAt: failures[0]?.createdAt ?? null,
  };
  state.pending.push(entry);
  return state.suspend((s) => (entry.settle = s));
}

/** What a recorded activity event gives the workflow: its result, or its error re-thrown. */
export function recordedOutcome(state: ReplayState, ev: HistoryEvent, id: string, activityName: string): Promise<unknown> {
  if (ev.data.type === "binary") {
    if (ev.eventType === EV.ActivityCompleted) return Promise.resolve(ev.data.bytes);
  } else {
    const v = fromPayload(ev.data) as { name?: unknown; result?: unknown; error?: SerializedError };
    if (typeof v?.name === "string" && v.name !== activityName) {
      state.fatal ??= new NonDeterminismError(`activity id ${id} recorded "${v.name}" but the code now calls "${activityName}"`);
      return state.suspend();
    }
    if (ev.eventType === EV.ActivityCompleted) return Promise.resolve(v.result);
    if (ev.eventType === EV.ActivityFailed) return Promise.reject(state.restoreError(v.error!));
  }
  state.fatal ??= new NonDeterminismError(`activity id ${id} holds a ${ev.eventType} record, not an activity result`);
  return state.suspend();
}


/** Register a wait (sleep, receive…). Only the first wait of a tick is taken; the rest re-register next step. */
export function requestWait(state: ReplayState, wait: WaitRequest): Promise<never> {
  state.wait ??= wait;
  return state.suspend();
}

/**
 * A workflow function running against its history. `next()` reports where it
 * stopped; `resume()` settles the suspended activity calls with the records a
 * step just wrote and runs on to the next stop — the same values a replay
 * from the top would give, without replaying.
 */
export class ReplayRun {
  private settled: { ok: true; value: unknown } | { ok: false; error: unknown } | null = null;
  private readonly run: Promise<unknown>;

  constructor(
    fn: (ctx: WorkflowContext, input: unknown) => Promise<unknown>,
    input: unknown,
    private readonly state: ReplayState,
    ctx: WorkflowContext,
  ) {
    this.run = (async () => fn(ctx, input))().then(
      (value) => (this.settled = { ok: true, value }),
      (error: unknown) => (this.settled = { ok: false, error }),
    );
  }

  async next(): Promise<ReplayResult> {
    const { state } = this;
    // A workflow that neither settles nor suspends within one macrotask is
    // awaiting something that is not an Edda operation (I/O in workflow code).
    const watchdog = new Promise<void>((resolve) => nextMacrotask(resolve));
    await Promise.race([this.run, state.suspended, watchdog]);
    const newCompensations = state.newCompensations.splice(0);
    const s = this.settled as { ok: true; value: unknown } | { ok: false; error: unknown } | null;
    if (state.fatal) return { outcome: { kind: "nondeterminism", error: state.fatal }, newCompensations };
    if (state.recurInput) return { outcome: { kind: "recur", input: state.recurInput.input }, newCompensations };
    if (state.pending.length) return { outcome: { kind: "activities", activities: [...state.pending] }, newCompensations };
    if (state.wait) return { outcome: { kind: "wait", wait: state.wait }, newCompensations };
    if (s?.ok) return { outcome: { kind: "completed", output: s.value }, newCompensations };
    if (s && !s.ok) return { outcome: { kind: "failed", error: s.error }, newCompensations };
    return {
      outcome: { kind: "nondeterminism", error: new NonDeterminismError("the workflow awaited something that is not an Edda operation; do I/O in activities") },
      newCompensations,
    };
  }

  /**
   * Continue after the pending activities got their final records (`events`,
   * as written to history). Null when some pending call has no final record
   * (a retry is scheduled): the run cannot go on in memory.
   */
  async resume(events: HistoryEvent[]): Promise<ReplayResult | null> {
    const { state } = this;
    const byId = new Map(events.map((e) => [e.activityId, e]));
    const pending = state.pending.splice(0);
    if (pending.some((p) => !byId.has(p.activityId) || !p.settle)) return null;
    state.wait = null;
    state.rearm();
    for (const p of pending) {
      recordedOutcome(state, byId.get(p.activityId)!, p.activityId, p.activity.activityName).then(p.settle!.resolve, p.settle!.reject);
    }
    return this.next();
  }
}

/** Run the workflow function against its history and report where it stopped. */
export function replay(
  fn: (ctx: WorkflowContext, input: unknown) => Promise<unknown>,
  input: unknown,
  state: ReplayState,
  ctx: WorkflowContext,
): Promise<ReplayResult> {
  return new ReplayRun(fn, input, state, ctx).next();
}
