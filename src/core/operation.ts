/**
 * The operation protocol: the one path every Edda operation in workflow code
 * takes — activities, timers, message waits, the built-in `edda.*` activities,
 * recorded values, races, compensation registration.
 *
 *   id        deterministic: `{prefix}:{n}` in call order, or the user's
 *             explicit id, escaped (ids.ts)
 *   open      the call returns a promise only the replay loop settles
 *   record    the loop delivers the operation's history record when the code
 *             is quiescent; `decode` turns it into the value (or the error
 *             re-thrown), or reports that the record belongs to another kind
 *             of operation (NonDeterminismError)
 *   no record the operation's `request` tells the engine what to do at the
 *             step boundary (run an activity, register a wait, record a value)
 *
 * Only this module creates workflow contexts and knows their replay state (a
 * WeakMap: nothing of it is typed into the public `WorkflowContext`).
 */
import type { Activity } from "./activity.ts";
import type { WorkflowContext } from "./context.ts";
import { explicitId } from "./ids.ts";
import { EV, type HistoryEvent } from "./model.ts";
import { decodeActivityRecord, type Decoded, type OpenOperation, type OperationRequest, type ReplayState } from "./replay.ts";
import { fromPayload } from "./serialization.ts";

const states = new WeakMap<object, ReplayState>();

export function replayStateOf(ctx: WorkflowContext): ReplayState {
  const state = typeof ctx === "object" && ctx !== null ? states.get(ctx) : undefined;
  if (!state) throw new TypeError("not a workflow context: Edda operations must be called with the workflow's ctx");
  return state;
}

export function isWorkflowContext(x: unknown): x is WorkflowContext {
  return typeof x === "object" && x !== null && states.has(x);
}

export interface OperationSpec {
  id: string;
  /** How messages name it: `activity "charge"`, `a timer`… */
  describe: string;
  request: OperationRequest;
  decode(ev: HistoryEvent): Decoded;
}

/** A promise that never settles: what a run gets once it is doomed (the loop reports the error). */
const never = <T>() => new Promise<T>(() => {});

/** An open operation: the spec and how to settle its promise (one shape for every kind, built without a spread). */
class Open implements OpenOperation {
  readonly id: string;
  readonly request: OperationSpec["request"];
  constructor(
    private readonly spec: OperationSpec,
    readonly resolve: (value: unknown) => void,
    readonly reject: (error: unknown) => void,
  ) {
    this.id = spec.id;
    this.request = spec.request;
  }

  /** Only messages use it: a spec may build it on demand. */
  get describe(): string {
    return this.spec.describe;
  }

  decode(ev: HistoryEvent): Decoded {
    return this.spec.decode(ev);
  }
}

/** Open an operation (see the module comment). */
export function operation<T>(ctx: WorkflowContext, spec: OperationSpec): Promise<T> {
  const state = replayStateOf(ctx);
  if (!state.claim(spec.id, spec)) return never();
  return new Promise<T>((resolve, reject) => {
    state.open.set(spec.id, new Open(spec, resolve as (v: unknown) => void, reject));
  });
}

/** The id of the next operation: the user's explicit id (escaped) or `{prefix}:{n}`. */
export function operationId(ctx: WorkflowContext, prefix: string, explicit?: string): string {
  const state = replayStateOf(ctx);
  return explicit !== undefined ? explicitId(explicit) : state.nextId(prefix);
}

/** `await act(ctx, ...args)` inside a workflow. */
export function callActivity<A extends unknown[], R>(ctx: WorkflowContext, def: Activity<A, R>, args: A, explicit?: string): Promise<R> {
  return callActivityAt(ctx, def, args, operationId(ctx, def.activityName, explicit));
}

/**
 * An activity call's operation. A class, not a literal with closures: a cold replay opens one per
 * history entry, and its description is built only for a message.
 */
class ActivityOperation implements OperationSpec {
  readonly request: OperationRequest;
  constructor(
    readonly id: string,
    private readonly state: ReplayState,
    private readonly name: string,
    def: Activity,
    args: unknown[],
  ) {
    this.request = { kind: "activity", activity: def, args };
  }

  get describe(): string {
    return `activity "${this.name}"`;
  }

  decode(ev: HistoryEvent): Decoded {
    return decodeActivityRecord(this.state, ev, this.name);
  }
}

/** Call an activity at an id that is already final (built-in activities build theirs from escaped user text). */
export function callActivityAt<A extends unknown[], R>(ctx: WorkflowContext, def: Activity<A, R>, args: A, id: string): Promise<R> {
  const state = replayStateOf(ctx);
  state.uses(def as unknown as Activity);
  return operation<R>(ctx, new ActivityOperation(id, state, def.activityName, def as unknown as Activity, args));
}

/** A value made in workflow code and recorded once (`ctx.now()`…); replays return the recorded value. */
export function recordedValue<T>(ctx: WorkflowContext, prefix: string, produce: () => T): Promise<T> {
  return operation<T>(ctx, {
    id: operationId(ctx, prefix),
    describe: `ctx.${prefix}()`,
    request: { kind: "value", produce },
    decode: (ev) => (ev.eventType === EV.ValueRecorded ? { ok: true, value: (fromPayload(ev.data) as { value: T }).value } : { mismatch: `holds a ${ev.eventType} record` }),
  });
}

export interface ContextInfo {
  instanceId: string;
  workflowName: string;
  run: number;
}

/** The context a workflow function gets, bound to its replay state; `clock` is what `ctx.now()` records (engine's EngineParts.clock). */
export function createWorkflowContext(info: ContextInfo, state: ReplayState, clock: () => number = Date.now): WorkflowContext {
  const ctx: WorkflowContext = {
    instanceId: info.instanceId,
    workflowName: info.workflowName,
    run: info.run,
    get isReplaying() {
      return state.isReplaying;
    },
    recur(input: unknown): Promise<never> {
      state.recurInput ??= { input };
      return never();
    },
    now: () => recordedValue(ctx, "now", () => new Date(clock())),
    random: () => recordedValue(ctx, "random", () => Math.random()),
    uuid: () => recordedValue(ctx, "uuid", () => crypto.randomUUID()),
  };
  states.set(ctx, state);
  return ctx;
}
