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

/**
 * The settling functions of the promise being made (see `open`): one executor for every operation, so
 * opening one allocates no closure for it.
 */
const unset = (): void => {};
let capturedResolve: (value: unknown) => void = unset;
let capturedReject: (error: unknown) => void = unset;
const capture = (resolve: (value: unknown) => void, reject: (error: unknown) => void): void => {
  capturedResolve = resolve;
  capturedReject = reject;
};

/** An open operation whose promise is made by `open`. */
interface Settleable extends OpenOperation {
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Claim `op`'s id, make its promise, and register it as open (under its id, in the order opened). */
function open<T>(state: ReplayState, op: Settleable): Promise<T> {
  if (!state.claim(op.id, op)) return never();
  const promise = new Promise<T>(capture as (resolve: (value: T) => void, reject: (error: unknown) => void) => void);
  op.resolve = capturedResolve;
  op.reject = capturedReject;
  state.open.set(op.id, op);
  return promise;
}

/** An open operation: the spec and how to settle its promise (one shape for every kind, built without a spread). */
class Open implements Settleable {
  readonly id: string;
  readonly request: OperationSpec["request"];
  resolve: (value: unknown) => void = unset;
  reject: (error: unknown) => void = unset;
  constructor(private readonly spec: OperationSpec) {
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
  return open<T>(replayStateOf(ctx), new Open(spec));
}

/** The id of the next operation: the user's explicit id (escaped) or `{prefix}:{n}`. */
export function operationId(ctx: WorkflowContext, prefix: string, explicit?: string): string {
  const state = replayStateOf(ctx);
  return explicit !== undefined ? explicitId(explicit) : state.nextId(prefix);
}

/** `await act(ctx, ...args)` inside a workflow. */
export function callActivity<A extends unknown[], R>(ctx: WorkflowContext, def: Activity<A, R>, args: A, explicit?: string): Promise<R> {
  const state = replayStateOf(ctx);
  return activityIn<R>(state, def as unknown as Activity, args, explicit !== undefined ? explicitId(explicit) : state.nextId(def.activityName));
}

/**
 * An activity call, open: its own request (`request` is the operation itself) and its promise's settling
 * functions in one object. A cold replay opens one per history entry and keeps it until its record is
 * delivered — on a long history the objects alive at once are what the garbage collector pays for — and
 * its description is built only for a message. The replay state comes with the record (`decode`), not as a
 * field.
 */
class ActivityOperation implements Settleable {
  resolve: (value: unknown) => void = unset;
  reject: (error: unknown) => void = unset;
  constructor(
    readonly id: string,
    readonly activity: Activity,
    readonly args: unknown[],
  ) {}

  /** On the prototype, not a field: one word less per open call. */
  get kind(): "activity" {
    return "activity";
  }

  get request(): OperationRequest {
    return this;
  }

  get describe(): string {
    return `activity "${this.activity.activityName}"`;
  }

  decode(ev: HistoryEvent, state: ReplayState): Decoded {
    return decodeActivityRecord(state, ev, this.activity.activityName);
  }
}

function activityIn<R>(state: ReplayState, def: Activity, args: unknown[], id: string): Promise<R> {
  state.uses(def);
  return open<R>(state, new ActivityOperation(id, def, args));
}

/** Call an activity at an id that is already final (built-in activities build theirs from escaped user text). */
export function callActivityAt<A extends unknown[], R>(ctx: WorkflowContext, def: Activity<A, R>, args: A, id: string): Promise<R> {
  return activityIn<R>(replayStateOf(ctx), def as unknown as Activity, args, id);
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
