/**
 * Deterministic replay. A workflow function runs from the top; every Edda
 * operation it calls is *opened* under a deterministic id (see `operation.ts`)
 * and returns a promise that only this module settles.
 *
 * The run advances in waves, and the same waves whether it replays a stored
 * history cold or continues in memory after a step (warm):
 *
 *   1. let the code run until it is quiescent (one macrotask: every microtask,
 *      every `await` of an already-settled value, has drained);
 *   2. deliver the next history record, in history order, to the open
 *      operation with its id — exactly one record per wave;
 *   3. repeat until no record is left; then report what the run waits on:
 *      its result, the open activities (run together at the step boundary),
 *      or its first open wait.
 *
 * Because a record is delivered only when the code is quiescent, and one at a
 * time, the interleaving of concurrent branches (`Promise.all`) — and with it
 * the counters that name operations — depends only on the order of records,
 * never on whether they were already stored (cold replay) or just written
 * (warm run). That is the equivalence the property suite checks.
 *
 * Operations that wait are never resolved at call time: a suspended call is a
 * promise no user `try/catch` can settle or swallow; code after it never runs
 * until the engine delivers its record.
 *
 * Pure: no I/O. The engine turns a `ReplayOutcome` into database writes.
 */
import type { Activity } from "./activity.ts";
import { NonDeterminismError } from "./errors.ts";
import type { ActivityRegistry } from "./registry.ts";
import { isDerivedId } from "./ids.ts";
import type { MatchDocument } from "./match.ts";
import { EV, WAIT_EVENTS, type ChannelMode, type HistoryEvent, type HistoryEventType, type NewHistoryEvent } from "./model.ts";
import { deserializeError, fromJson, toPayload, type ErrorClass, type SerializedError } from "./serialization.ts";

/** History rows that settle an operation (rows at derived `id#…` ids only inform retries). */
const PRIMARY = new Set<string>([EV.ActivityCompleted, EV.ActivityFailed, EV.ValueRecorded, EV.StreamEmitted, ...WAIT_EVENTS]);

/** The key a per-wait webhook's token is derived from (EDDA_SECRET), and the app's public URL the link starts with. */
export interface WebhookLinks {
  key: string;
  /** EDDA_PUBLIC_URL; without it a link is the path alone (`/hooks/…`). */
  baseUrl?: string;
}

export interface PendingActivity {
  activityId: string;
  activity: Activity;
  args: unknown[];
  /** 1-based attempt about to run. */
  attempt: number;
  /**
   * When the first and the latest failed attempts were recorded — both the
   * database's clock (history `created_at`), for maxDuration.
   */
  firstFailureAt: Date | null;
  lastFailureAt: Date | null;
}

export interface CompensationRegistration {
  activityId: string;
  activityName: string;
  args: unknown[];
}

/** A wait the workflow is blocked on. */
export type WaitRequest =
  | { kind: "timer"; activityId: string; delaySeconds?: number; expiresAt?: Date }
  | {
      kind: "message";
      activityId: string;
      channel: string;
      timeoutSeconds?: number;
      timeoutAt?: Date;
      subscribeAs?: ChannelMode;
      /** An event wait (`waitEvent`): a new subscription looks back to the instance's start. */
      event?: boolean;
      /** Only messages whose document contains this (core/match.ts). */
      match?: MatchDocument;
      /** A race's webhook branch beside its message branch: a POST to this hook decides the wait too (core/race.ts). */
      hook?: WebhookBranch;
    }
  /** The outcome of a child workflow this run started (`invoke`). */
  | { kind: "child"; activityId: string; childInstanceId: string }
  /**
   * A POST to the per-wait URL `createWebhook` made at `hookId` (its expiry is the hook's), at `hook.wait()`'s
   * id or a race's; `timer`: a race's earliest timer branch, which decides the wait when it fires first.
   */
  | ({ kind: "webhook"; activityId: string; timer?: { delaySeconds?: number; expiresAt?: Date } } & WebhookBranch);

/** The hook a wait listens on: its creation's id and the run that created it. */
export interface WebhookBranch {
  hookId: string;
  run: number;
}

/** What the engine must do for an open operation that has no record yet. */
export type OperationRequest =
  | { kind: "activity"; activity: Activity; args: unknown[] }
  | { kind: "wait"; wait: WaitRequest }
  /** A value produced in the workflow and recorded once (`ctx.now()`…): no I/O, recorded at the next quiescence. */
  | { kind: "value"; produce: () => unknown; eventType?: HistoryEventType };

/**
 * Values stored out of line (engine/payload-sealing.ts): a record whose data is a reference is loaded when
 * it is delivered to the operation that takes it — never for a record no operation decodes (an emit's
 * data, which the code supplies itself) nor one the run never reaches — in one read with the records of
 * the other operations open at that moment (a `Promise.all`'s), which the waves that follow deliver.
 */
export interface DeferredValues {
  /** Whether the record's data is still to be loaded. */
  deferred(ev: HistoryEvent): boolean;
  /** Load the records' data in place, in one read. A failure fails the step, never the workflow. */
  load(events: HistoryEvent[]): Promise<void>;
}

/** A record's value or error, once decoded. */
export type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * How a record settles an operation; `mismatch` when the record does not belong to this kind of operation;
 * `later` when settling it takes asynchronous work that is no I/O (Web Crypto: a per-wait webhook's token).
 * The loop awaits `later` before it delivers anything else, so the run sees it settle at the same wave
 * whether the record was replayed or just written.
 */
export type Decoded = Settled | { mismatch: string } | { later: Promise<Settled> };

export interface OpenOperation {
  id: string;
  /** For messages: `activity "charge"`, `a timer`… */
  describe: string;
  request: OperationRequest;
  /** `state`: the run's, for what a record needs to decode (its error classes). */
  decode(ev: HistoryEvent, state: ReplayState): Decoded;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export type ReplayOutcome =
  | { kind: "completed"; output: unknown }
  | { kind: "failed"; error: unknown }
  | { kind: "activities"; activities: PendingActivity[] }
  | { kind: "wait"; wait: WaitRequest }
  | { kind: "recur"; input: unknown }
  | { kind: "nondeterminism"; error: NonDeterminismError };

export interface ReplayResult {
  outcome: ReplayOutcome;
  /** Compensations registered since the last report (to persist now; idempotent by id). */
  newCompensations: CompensationRegistration[];
  /** History rows produced by the workflow itself (recorded values), to persist with this step, in order. */
  newEvents: NewHistoryEvent[];
}

/** After every queued microtask has run: setImmediate where the runtime has it (Node, Deno), else setTimeout(0). */
export function nextMacrotask(fn: () => void): void {
  const si = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate;
  if (si) si(fn);
  else setTimeout(fn, 0);
}

/**
 * Node's `process.nextTick`, on Node itself only: there the tick queue runs once the microtask queue is
 * empty, so a tick queued from a microtask runs when every microtask queued before or after it has run —
 * quiescence without a turn of the event loop. Deno's, Bun's and workerd's `nextTick` give no such
 * guarantee, so those runtimes keep the macrotask.
 */
const nodeTick: ((fn: () => void) => void) | null = (() => {
  const g = globalThis as { process?: { nextTick?: unknown; versions?: { node?: unknown } }; Deno?: unknown; Bun?: unknown; navigator?: { userAgent?: unknown } };
  const p = g.process;
  if (!p || typeof p.nextTick !== "function" || typeof p.versions?.node !== "string") return null;
  if (g.Deno !== undefined || g.Bun !== undefined) return null;
  if (typeof g.navigator?.userAgent === "string" && g.navigator.userAgent.startsWith("Cloudflare-Workers")) return null;
  const tick = p.nextTick as (fn: () => void) => void;
  return (fn) => tick(fn);
})();

/** Waves between two real macrotasks, so that a long replay lets the process's I/O in now and then. */
const WAVES_PER_MACROTASK = 64;
let waves = 0;

/**
 * Run `wave` once the code is quiescent (every microtask has run). On Node a tick queued from a microtask,
 * with a macrotask every WAVES_PER_MACROTASK waves; elsewhere a macrotask. Either way the microtask queue
 * is empty when `wave` runs, which is all the replay depends on: where the waves fall never changes what a
 * run sees. A cold replay then costs no event-loop turn per history entry. `tick` is `() => nodeTick(wave)`,
 * made once per run: a wave allocates no promise of its own and no closure (a cold replay is a wave per
 * history entry, and what it allocates is what the garbage collector pays for on a long history).
 */
const settledPromise = Promise.resolve();
function afterQuiescence(wave: () => void, tick: () => void): void {
  if (nodeTick && ++waves < WAVES_PER_MACROTASK) void settledPromise.then(tick);
  else {
    waves = 0;
    nextMacrotask(wave);
  }
}

export class ReplayState {
  /** Settling records in history order, and how many were delivered. */
  private readonly primary: HistoryEvent[] = [];
  /** The ids of `primary`, made when first asked for (`hasRecord`): a cold replay needs none. */
  private primaryIds: Set<string> | null = null;
  /** Ids of the values this run recorded itself (already in `primary`), until the step's rows come back with them. */
  private readonly ownRecords = new Set<string>();
  private cursor = 0;
  /** Rows at derived ids (`id#n` failed attempts), by id. */
  private readonly derived = new Map<string, HistoryEvent>();
  private readonly counters = new Map<string, number>();
  /** Ids claimed so far but the counted ones (see `claim`): an id is used once per run. */
  private readonly used = new Set<string>();
  /** Operations waiting for their record, in the order they were opened. */
  readonly open = new Map<string, OpenOperation>();
  recurInput: { input: unknown } | null = null;
  fatal: NonDeterminismError | null = null;
  readonly newCompensations: CompensationRegistration[] = [];
  readonly newEvents: NewHistoryEvent[] = [];
  /** Where records by reference are loaded from (none: every record's data is in memory). */
  values: DeferredValues | null = null;
  /** Undelivered records still to be loaded, by id: made at the first load. */
  private deferredById: Map<string, HistoryEvent> | null = null;

  constructor(
    /** One run's history in order; one row per activity id (the table's UNIQUE(instance_id, activity_id)). */
    history: HistoryEvent[],
    readonly errorClasses: Record<string, ErrorClass>,
    /** The app's registry: every activity the run calls or registers as a compensation is added. */
    private readonly registry?: ActivityRegistry,
    /** What per-wait webhook URLs are made of (webhook-waits.ts); none: a replay that never hands a URL out (verify). */
    readonly webhookLinks: WebhookLinks | null = null,
  ) {
    this.append(history);
  }

  /**
   * Add records (a step's new rows, in the order written). A value the run
   * recorded itself is known already and not added twice.
   */
  append(events: HistoryEvent[]): void {
    for (const event of events) {
      const id = event.activityId;
      if (isDerivedId(id)) this.derived.set(id, event);
      else if (PRIMARY.has(event.eventType) && !this.ownRecords.delete(id)) {
        this.primaryIds?.add(id);
        this.primary.push(event);
      }
    }
  }

  /** Add a value the run produced itself (to deliver now, and to recognise when the step's rows come back). */
  appendOwn(event: HistoryEvent): void {
    this.append([event]);
    this.ownRecords.add(event.activityId);
  }

  /** An activity the code uses (called, or registered as a compensation). */
  uses(def: Activity): void {
    this.registry?.add(def);
  }

  /** What runs for `def`: the app's test double of it (ActivityRegistry.replace), else `def`. */
  implementation(def: Activity): Activity {
    return this.registry ? this.registry.implementation(def) : def;
  }

  /** Whether history holds a settling record at `id` (delivered or not). */
  hasRecord(id: string): boolean {
    this.primaryIds ??= new Set(this.primary.map((e) => e.activityId));
    return this.primaryIds.has(id);
  }

  /** True while recorded history remains to be delivered. */
  get isReplaying(): boolean {
    return this.cursor < this.primary.length;
  }

  nextId(prefix: string): string {
    const n = (this.counters.get(prefix) ?? 0) + 1;
    this.counters.set(prefix, n);
    // join makes one flat string; a template literal makes a rope of two concatenations and the number's
    // text (three objects, ~90 bytes against ~40), kept as long as the operation is open.
    return (this.counted = [prefix, n].join(":"));
  }

  /** The id `nextId` made last, until it is claimed. */
  private counted: string | null = null;

  /**
   * Claim `id` for one operation (`what.describe` names it, read only for the error); a second operation
   * with the same id in one run is a bug in the code. A counted id (`nextId`) is unique by construction —
   * a prefix's counter only grows, `{prefix}:{n}` splits back at its last `:`, and no other id ends in
   * `:{digits}` (explicit ids have no `:`, ids.ts) — so only the others are remembered: a cold replay
   * claims one id per history entry.
   */
  claim(id: string, what: { readonly describe: string }): boolean {
    if (id === this.counted) {
      this.counted = null;
      return true;
    }
    if (this.used.has(id)) {
      this.fatal ??= new NonDeterminismError(`two operations use the id ${id} (the second is ${what.describe}); explicit ids must be unique within a run`);
      return false;
    }
    this.used.add(id);
    return true;
  }

  /** Failed-attempt rows recorded for an operation. */
  failedAttempts(id: string): HistoryEvent[] {
    const out: HistoryEvent[] = [];
    for (let n = 1; ; n++) {
      const ev = this.derived.get(`${id}#${n}`);
      if (!ev) return out;
      out.push(ev);
    }
  }

  /** The next record to deliver, if any. */
  peek(): HistoryEvent | undefined {
    return this.primary[this.cursor];
  }

  /** Deliver the next record to its open operation; false (with `fatal` set) when none can take it; a promise when it settles `later`. */
  deliverNext(): boolean | Promise<void> {
    const ev = this.primary[this.cursor]!;
    const op = this.open.get(ev.activityId);
    if (!op) {
      const waiting = [...this.open.values()].map((o) => `${o.describe} (${o.id})`);
      this.fatal ??= new NonDeterminismError(
        `history expects ${describeRecord(ev)} next, but the code ${waiting.length ? `waits on ${waiting.join(", ")}` : "called no operation with that id"}`,
      );
      return false;
    }
    if (this.values?.deferred(ev) && ev.eventType !== EV.StreamEmitted) return this.loadThenDeliver(ev);
    const d = op.decode(ev, this);
    if ("mismatch" in d) {
      this.fatal ??= new NonDeterminismError(`${op.describe} at ${op.id}: ${d.mismatch}`);
      return false;
    }
    this.cursor++;
    this.open.delete(op.id);
    if ("later" in d) return d.later.then((r) => settle(op, r), (error: unknown) => op.reject(error));
    settle(op, d);
    return true;
  }

  /** Load `ev` (and the records of the other open operations) by reference, then deliver it. */
  private async loadThenDeliver(ev: HistoryEvent): Promise<void> {
    const values = this.values!;
    const batch = [ev];
    if (this.open.size > 1) {
      this.deferredById ??= new Map(this.primary.slice(this.cursor).filter((e) => e.eventType !== EV.StreamEmitted && values.deferred(e)).map((e) => [e.activityId, e]));
      for (const id of this.open.keys()) {
        const rec = this.deferredById.get(id);
        if (rec && rec !== ev && values.deferred(rec)) batch.push(rec);
      }
    }
    await values.load(batch);
    if (values.deferred(ev)) throw new Error(`the value of ${describeRecord(ev)} is still a reference after it was loaded`);
    const delivered = this.deliverNext();
    if (delivered instanceof Promise) await delivered;
  }

  restoreError(s: SerializedError): Error {
    return deserializeError(s, this.errorClasses);
  }
}

function settle(op: OpenOperation, d: Settled): void {
  if (d.ok) op.resolve(d.value);
  else op.reject(d.error);
}

function describeRecord(ev: HistoryEvent): string {
  const data = ev.data;
  const name = data.type === "json" ? (safeParse(data.json) as { name?: unknown } | null)?.name : undefined;
  return `${ev.eventType}${typeof name === "string" ? ` of "${name}"` : ""} at ${ev.activityId}`;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** What a recorded activity event gives the workflow: its result, or its error re-thrown. */
export function decodeActivityRecord(state: ReplayState, ev: HistoryEvent, activityName: string): Decoded {
  const data = ev.data;
  if (data.type === "binary") {
    return ev.eventType === EV.ActivityCompleted ? { ok: true, value: data.bytes } : { mismatch: `holds a binary ${ev.eventType} record` };
  }
  if (ev.eventType === EV.ActivityCompleted) {
    const result = recordedResult(data.json, activityName);
    if (result !== NOT_THE_USUAL_SHAPE) return { ok: true, value: result };
  }
  const v = fromJson(data.json) as { name?: unknown; result?: unknown; error?: SerializedError } | null;
  if (typeof v?.name === "string" && v.name !== activityName) return { mismatch: `history recorded "${v.name}" but the code now calls "${activityName}"` };
  if (ev.eventType === EV.ActivityCompleted) return { ok: true, value: v?.result };
  if (ev.eventType === EV.ActivityFailed) return { ok: false, error: state.restoreError(v!.error!) };
  return { mismatch: `holds a ${ev.eventType} record, not an activity result` };
}

const NOT_THE_USUAL_SHAPE = Symbol("not the usual shape");
/** `{"name":<name>,"result":` by activity name: how the engine writes a completed activity (execute.ts resultPayload). */
const resultPrefixes = new Map<string, string>();

/**
 * The result in an activity's record as the engine writes it, `{"name":<this name>,"result":R}`, decoded
 * from R alone: a cold replay decodes one record per history entry, and the name is checked by comparing
 * text instead of being parsed. Anything else — another name, a retried activity's `"attempts"` after R
 * (then R's text followed by `,"attempts":…` is no JSON value and does not parse), other spacing — is
 * NOT_THE_USUAL_SHAPE, decoded whole by the caller.
 */
function recordedResult(json: string, activityName: string): unknown {
  let prefix = resultPrefixes.get(activityName);
  if (prefix === undefined) resultPrefixes.set(activityName, (prefix = `{"name":${JSON.stringify(activityName)},"result":`));
  if (!json.startsWith(prefix) || json.charCodeAt(json.length - 1) !== 125 /* } */) return NOT_THE_USUAL_SHAPE;
  try {
    return fromJson(json.slice(prefix.length, -1));
  } catch {
    return NOT_THE_USUAL_SHAPE;
  }
}

/**
 * A workflow function running against its history. `next()` delivers the
 * records it has and reports where the run stopped; `resume()` adds the
 * records a step just wrote and runs on — the waves a cold replay of the
 * longer history would go through.
 */
export class ReplayRun {
  private settled: Settled | null = null;

  constructor(
    fn: (ctx: never, input: unknown) => Promise<unknown>,
    input: unknown,
    private readonly state: ReplayState,
    ctx: unknown,
  ) {
    void (async () => fn(ctx as never, input))().then(
      (value) => (this.settled = { ok: true, value }),
      (error: unknown) => (this.settled = { ok: false, error }),
    );
  }

  async next(): Promise<ReplayResult> {
    const outcome = await this.advance();
    const { state } = this;
    return { outcome, newCompensations: state.newCompensations.splice(0), newEvents: state.newEvents.splice(0) };
  }

  /** Where `advance` reports to, while the waves run. */
  private report: { resolve: (o: ReplayOutcome) => void; reject: (e: unknown) => void } | null = null;

  /** Run waves until the run stops on something the history does not hold. */
  private advance(): Promise<ReplayOutcome> {
    return new Promise<ReplayOutcome>((resolve, reject) => {
      this.report = { resolve, reject };
      afterQuiescence(this.wave, this.tick);
    });
  }

  private readonly tick = (): void => nodeTick!(this.wave);
  private readonly again = (): void => afterQuiescence(this.wave, this.tick);

  private readonly fail = (error: unknown): void => {
    const r = this.report!;
    this.report = null;
    r.reject(error);
  };

  /** One wave, the code quiescent: deliver the next record (then wave again), or report where the run stopped. */
  private readonly wave = (): void => {
    let outcome: ReplayOutcome | null;
    try {
      outcome = this.waveOnce();
    } catch (error) {
      this.fail(error);
      return;
    }
    if (outcome) {
      const r = this.report!;
      this.report = null;
      r.resolve(outcome);
    }
  };

  /** The outcome when the run stops here; null when a next wave is scheduled. */
  private waveOnce(): ReplayOutcome | null {
    const { state } = this;
    if (state.fatal) return { kind: "nondeterminism", error: state.fatal };
    if (state.recurInput) return { kind: "recur", input: state.recurInput.input };
    if (state.peek()) {
      const later = state.deliverNext();
      if (later instanceof Promise) void later.then(this.again, this.fail);
      else afterQuiescence(this.wave, this.tick);
      return null;
    }
    const value = firstValueRequest(state.open);
    if (value) {
      // Produced now, recorded with this step, delivered like any record.
      const ev = recordValue(value);
      state.newEvents.push(ev);
      state.appendOwn({ ...ev, id: 0, createdAt: new Date(0) });
      afterQuiescence(this.wave, this.tick);
      return null;
    }
    const s = this.settled as Settled | null;
    if (s?.ok) return { kind: "completed", output: s.value };
    if (s) return { kind: "failed", error: s.error };
    const activities: PendingActivity[] = [];
    let wait: WaitRequest | null = null;
    for (const op of state.open.values()) {
      if (op.request.kind === "activity") activities.push(this.pending(op.id, op.request.activity, op.request.args));
      else if (op.request.kind === "wait") wait ??= op.request.wait;
    }
    if (activities.length) return { kind: "activities", activities };
    if (wait) return { kind: "wait", wait };
    return {
      kind: "nondeterminism",
      error: new NonDeterminismError("the workflow awaited something that is not an Edda operation; do I/O in activities"),
    };
  }

  private pending(activityId: string, activity: Activity, args: unknown[]): PendingActivity {
    const failures = this.state.failedAttempts(activityId);
    return failedSoFar(activityId, this.state.implementation(activity), args, failures);
  }

  /**
   * Continue after a step wrote `events` (in the order written). Null when a
   * pending activity got no final record (a retry is scheduled): the run
   * waits for the retry timer and is not continued in memory.
   */
  async resume(pending: PendingActivity[], events: HistoryEvent[]): Promise<ReplayResult | null> {
    const final = new Set(events.filter((e) => PRIMARY.has(e.eventType) && !isDerivedId(e.activityId)).map((e) => e.activityId));
    if (pending.some((p) => !final.has(p.activityId))) return null;
    this.state.append(events);
    return this.next();
  }
}

/** The first open operation that records a value (`ctx.now()`…), in the order they were opened. */
function firstValueRequest(open: ReadonlyMap<string, OpenOperation>): OpenOperation | undefined {
  for (const op of open.values()) if (op.request.kind === "value") return op;
  return undefined;
}

function recordValue(op: OpenOperation): NewHistoryEvent {
  const { produce, eventType } = op.request as Extract<OperationRequest, { kind: "value" }>;
  return { activityId: op.id, eventType: eventType ?? EV.ValueRecorded, data: toPayload({ value: produce() }) };
}

/** A pending activity after `failures` (its failed-attempt rows, oldest first). */
export function failedSoFar(activityId: string, activity: Activity, args: unknown[], failures: HistoryEvent[]): PendingActivity {
  return {
    activityId,
    activity,
    args,
    attempt: failures.length + 1,
    firstFailureAt: failures[0]?.createdAt ?? null,
    lastFailureAt: failures.at(-1)?.createdAt ?? null,
  };
}
