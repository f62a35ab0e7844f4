/**
 * One step of one instance — the unit of work of every request.
 *
 *   lease (or a handed-off lease) + history   → one statement
 *   replay the workflow to its first unrecorded operation
 *   run the activities of that tick
 *   conclude, fenced by the lease token       → one statement (+ user writes)
 *   after commit: dispatch the follow-up with the lease handed to it
 *
 * A step whose lease was lost (expired and taken, or the instance cancelled)
 * commits nothing: the fenced conclusion matches no row and the transaction
 * rolls back, user writes included.
 */
import type { Transaction } from "../core/context.ts";
import { LeaseLostError } from "../core/errors.ts";
import { createWorkflowContext } from "../core/operation.ts";
import { failedSoFar, ReplayRun, ReplayState, type PendingActivity, type ReplayResult, type WaitRequest } from "../core/replay.ts";
import { compensationRows, continueWith, decide, needsStoredCompensations, parkConclusion, phase, waitingPlan, withLookAhead, type AfterCommit, type DecideOptions, type StepHistory, type StepOutcome, type StepPlan } from "./decide.ts";
import { waitKind } from "./wait-kinds.ts";
import { fromJson, toJson } from "../core/serialization.ts";
import { sendLastAlone } from "../storage/database.ts";
import { deferredValues, leaseLeftBy, overInstanceBound } from "./payload-sealing.ts";
import type { Fence, InstanceRecord, LeasedInstance, NewCompensation, NewHistoryEvent, StepConclusion, Storage, TxStorage } from "../storage/types.ts";
import { deliverToParent, reportsToParent, startChildIn } from "./lifecycle.ts";
import { startChildActivity } from "./children.ts";
import { slotFreed } from "./flow-control.ts";
import type { DispatchScope, StepRequest } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { notifyPublished } from "./channels.ts";
import { notifyOutbox } from "./outbox.ts";
import { isConnectionLost, isTransientFailure, stepFailed } from "./poison.ts";
import { invoke, isTransactional, makeActivityContext, type ActivityNotify, type ActivityOutcome, type ChildStart } from "./execute.ts";
import { appendEmits } from "./streams.ts";
import { adoptOrRefuse } from "./versioning.ts";
import { StreamWriter } from "./stream-writer.ts";

const isTx = (s: Storage): s is TxStorage => typeof (s as Partial<TxStorage>).afterCommit === "function";

/** What a step uses of the engine. */
export type StepDeps = Uses<
  | "storage"
  | "dispatcher"
  | "workflows"
  | "activities"
  | "hooks"
  | "definitions"
  | "tracing"
  | "warmRuns"
  | "serviceName"
  | "deployment"
  | "runs"
  | "workerId"
  | "defaultLeaseSeconds"
  | "handoffLeaseSeconds"
  | "retryPolicy"
  | "errorClasses"
  | "quarantineAfter"
  | "outbox"
  | "metrics"
  | "streamMaxBytes"
  | "clock"
  | "webhookLinks"
  | "groupCommit"
  | "leasedReads"
>;

export type StepResult =
  | { status: "skipped"; reason: string }
  | { status: "lease_lost" }
  | { status: "concluded"; instanceStatus: string };

/** Thrown out of the step transaction to roll back a lone activity's writes. */
class ActivityRollback {
  constructor(readonly outcome: ActivityOutcome) {}
}

/** Run one step of `req.instanceId`; with metrics on, counted and timed by workflow and outcome. */
export async function runStep(deps: StepDeps, req: StepRequest, scope?: DispatchScope): Promise<StepResult> {
  const metrics = deps.metrics;
  if (!metrics) return runStepOnce(deps, req, scope, {});
  const started = performance.now();
  const seen: { workflowName?: string } = {};
  let outcome = "error";
  try {
    const r = await runStepOnce(deps, req, scope, seen);
    outcome = r.status === "concluded" ? r.instanceStatus : r.status;
    return r;
  } finally {
    metrics.step(seen.workflowName, outcome, (performance.now() - started) / 1000);
  }
}

async function runStepOnce(deps: StepDeps, req: StepRequest, scope: DispatchScope | undefined, seen: { workflowName?: string }): Promise<StepResult> {
  const { storage } = deps;
  let leased: LeasedInstance | null = null;
  // Checked before any await: a follow-up dispatched in-process may start at once.
  const warm = req.lease ? deps.warmRuns.take(req.instanceId, req.lease) : null;
  if (warm) leased = { instance: warm.instance, fence: { instanceId: req.instanceId, ...req.lease! }, history: [] };
  try {
    if (req.lease && !leased) {
      const handed = { instanceId: req.instanceId, ...req.lease };
      leased = await (deps.leasedReads ? deps.leasedReads.load(handed) : storage.loadLeased(handed));
      // A cancel or deadline landed after the hand-off and kept the lock for this step: give it back and take
      // the instance as it is now (its compensations).
      if (!leased && !(await storage.releaseFencedOut(handed))) {
        // Otherwise a follow-up names the lease it continues, which makes it single-use: once that lease has
        // moved on (the step ran, the lease was given back or taken over), the request is spent — a replay of a
        // captured one runs nothing. Only a hand-off that ran out untouched (token unchanged) is still taken.
        leased = await storage.acquireLease(req.instanceId, deps.workerId, deps.defaultLeaseSeconds, { withHistory: true, handedOff: req.lease, runs: await deps.runs() });
        if (!leased) return { status: "skipped", reason: "stale follow-up: the lease it continues has moved on (its step ran, or the lease was released or taken over)" };
      }
    }
    leased ??= await storage.acquireLease(req.instanceId, deps.workerId, deps.defaultLeaseSeconds, { withHistory: true, runs: await deps.runs() });
  } catch (err) {
    // The lease was taken but its payloads could not be opened (no key, a key this deployment lacks):
    // a failed step like any other, so the lease goes back and the failure counts towards quarantine.
    const left = leaseLeftBy(err);
    if (left) await stepFailed(storage, left, err, deps.quarantineAfter, () => deps.metrics?.quarantined("step"));
    // The first statement met a dead connection: try again once the database answers, giving a
    // handed-off lease back first (else the retry would find it held by this very worker).
    if (isConnectionLost(err)) {
      const held = req.lease ? { instanceId: req.instanceId, ...req.lease } : null;
      redispatchSoon(deps, req.instanceId, held ? () => storage.releaseLease(held) : () => storage.getInstance(req.instanceId), deps.handoffLeaseSeconds, scope);
    }
    throw err;
  }
  if (!leased) return { status: "skipped", reason: "not runnable, finished, leased by another worker, or on a deployment this one may not run" };
  seen.workflowName = leased.instance.workflowName;

  const wf = deps.workflows.get(leased.instance.workflowName);
  if (!wf) {
    await storage.releaseLease(leased.fence);
    return { status: "skipped", reason: `workflow "${leased.instance.workflowName}" is not registered in this app` };
  }
  // The first step of an instance on this deployment's code (an `auto` workflow's, from an older deployment):
  // its history must replay here first (versioning.ts), else it stays on its deployment.
  const from = leased.instance.deployment;
  if (from !== null && !warm) {
    const current = (await deps.runs()).deployment;
    if (from !== current) {
      const refused = await adoptOrRefuse(deps, leased, wf, current);
      if (refused !== null) return { status: "skipped", reason: refused };
    }
  }
  const leaseSeconds = wf.options.lockTimeoutSeconds ?? leased.instance.lockTimeoutSeconds ?? deps.defaultLeaseSeconds;
  const renewal = new Renewal(storage, leased.fence, leaseSeconds, deps.handoffLeaseSeconds);
  try {
    const step = new Step(deps, leased, leaseSeconds, scope, renewal);
    if (warm?.run) return await step.continueWarm(warm.run, warm.next!);
    // Compensations or the body: decided in one place (decide.ts `phase`) for every way a step starts.
    return phase(leased.instance, leased.history) === "compensating" ? await step.compensate() : await step.advance();
  } catch (err) {
    deps.warmRuns.drop(req.instanceId);
    if (err instanceof LeaseLostError) {
      giveBackFencedOut(deps, leased.fence, scope);
      return { status: "lease_lost" };
    }
    // Unexpected (database down, a statement the database refuses…): the lease goes back so the
    // instance is retried soon; a failure that is not transient counts towards quarantine.
    const settled = await stepFailed(storage, leased.fence, err, deps.quarantineAfter, () => deps.metrics?.quarantined("step"));
    // The connection went away under the step (a killed backend, a server restart): run it again shortly
    // instead of leaving it to the next sweep. When the release failed too (the server is still down),
    // the lease is still ours: a plain re-dispatch would find the instance locked by this very worker
    // and be skipped until the lease expires, so the lease is given back first, once the database answers.
    // If the conclusion's COMMIT landed but its reply did not, the instance is handed off (token + 1, still
    // this worker's) to a follow-up that was never dispatched: that lease is given back too. Nothing else
    // can hold it — the follow-up is dispatched only once the commit is acknowledged.
    const held = leased.fence;
    const handedOff: Fence = { ...held, token: held.token + 1 };
    if (!isConnectionLost(err)) giveBackFencedOut(deps, held, scope);
    else {
      const giveBack = async () => {
        if (!settled && !(await storage.releaseLease(held))) await storage.releaseFencedOut(held);
        await storage.releaseLease(handedOff);
      };
      redispatchSoon(deps, req.instanceId, giveBack, leaseSeconds, scope);
    }
    throw err;
  } finally {
    renewal.stop();
  }
}

/**
 * The step lost its lease. When a cancel or a deadline is what fenced it out, the lock was kept for it (storage
 * `endInstance`) so that no compensation runs while this step's activities might still be doing what it
 * undoes: now that the step is over, give the lock back and run the compensations. Not awaited by the
 * step's caller; a give-back that fails leaves the lock to expire (the sweep's stale-lease task).
 */
function giveBackFencedOut(deps: StepDeps, fence: Fence, scope?: DispatchScope): void {
  const p = deps.storage.releaseFencedOut(fence).then(
    (freed) => {
      if (freed) deps.dispatcher.dispatch({ instanceId: fence.instanceId }, scope);
    },
    () => undefined,
  );
  scope?.waitUntil?.(p);
}

/** A short pause first: the pool replaces the dead connection, and a server that is restarting gets a moment. */
const REDISPATCH_DELAY_MS = 250;
/** Longest pause between two tries of a statement while the database does not answer. */
const ANSWER_RETRY_MAX_MS = 2000;

/**
 * Run the instance's step again soon. `first` is a statement that must get an answer before: giving
 * back the lease the failed step still holds (its release went to the same dead server), or a read
 * that tells the server is back. It is retried with backoff while the database does not answer, up
 * to `giveUpSeconds` (by then the lease has run out anyway and the sweep finds the instance). A
 * release that matches no row (the conclusion committed after all, or the lease was taken over)
 * still dispatches: the step then skips, or runs whatever is current.
 */
function redispatchSoon(deps: StepDeps, instanceId: string, first: (() => Promise<unknown>) | null, giveUpSeconds: number, scope?: DispatchScope): void {
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      (t as { unref?: () => void }).unref?.();
    });
  const giveUpAt = Date.now() + giveUpSeconds * 1000;
  const p = (async () => {
    await pause(REDISPATCH_DELAY_MS);
    for (let wait = REDISPATCH_DELAY_MS; first; wait = Math.min(wait * 2, ANSWER_RETRY_MAX_MS)) {
      try {
        await first();
        break;
      } catch (err) {
        // Not transient (the database was closed by its owner, the statement itself is refused): leave it to the sweep.
        if (!isTransientFailure(err) || isEnded(err) || Date.now() + wait > giveUpAt) return;
        await pause(wait);
      }
    }
    deps.dispatcher.dispatch({ instanceId }, scope);
  })();
  scope?.waitUntil?.(p);
}

/** The pool was ended on purpose (the app closed its database): no answer will come. */
function isEnded(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === "CONNECTION_ENDED") return true;
  }
  return false;
}

/**
 * Renew the lease while a long activity runs; stops at the step's end. A
 * renewal that matches no row means someone else owns the instance now: the
 * step starts nothing more (no further activity, no look-ahead) and ends
 * `lease_lost`. A renewal that fails for another reason (the database
 * briefly unreachable) is not a loss: the fenced conclusion still decides.
 */
class Renewal {
  private readonly timer: ReturnType<typeof setInterval>;
  private lost = false;
  /** Made when an activity first reads `ctx.signal` (most never do). */
  private aborter: AbortController | null = null;

  constructor(
    private readonly storage: Storage,
    private readonly fence: Fence,
    private readonly leaseSeconds: number,
    handoffSeconds: number,
  ) {
    this.timer = setInterval(() => this.renew(), (Math.min(leaseSeconds, handoffSeconds) * 1000) / 3);
    (this.timer as { unref?: () => void }).unref?.();
  }

  private renew(): void {
    this.storage.renewLease(this.fence, this.leaseSeconds).then(
      (ok) => {
        if (ok || this.lost) return;
        this.lost = true;
        clearInterval(this.timer);
        this.aborter?.abort(this.lostError());
      },
      () => undefined,
    );
  }

  private lostError(): LeaseLostError {
    return new LeaseLostError(`lease on ${this.fence.instanceId} lost while the step ran`);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Throws LeaseLostError once a renewal found the lease gone (expired and taken, or cancelled). */
  check(): void {
    if (this.lost) throw this.lostError();
  }

  /** Aborted (with a LeaseLostError) when a renewal finds the lease gone: the activities' `ctx.signal`. */
  get signal(): AbortSignal {
    if (!this.aborter) {
      this.aborter = new AbortController();
      if (this.lost) this.aborter.abort(this.lostError());
    }
    return this.aborter.signal;
  }
}

/** What an activity's Edda operations ask of the step (execute.ts ActivityNotify), as methods: one object per step. */
class StepNotify implements ActivityNotify {
  constructor(
    private readonly deps: StepDeps,
    private readonly instanceId: string,
    private readonly scope: DispatchScope | undefined,
  ) {}

  published(channel: string): void {
    notifyPublished(this.deps, channel, this.scope);
  }

  outbox(eventIds: string[]): void {
    notifyOutbox(this.deps, eventIds, this.scope);
  }

  startChild(storage: Storage, start: ChildStart): Promise<string> {
    return startChildIn(this.deps, storage, this.instanceId, start, (cb) => (isTx(storage) ? storage.afterCommit(cb) : cb()), this.scope);
  }

  traceparent(activityId: string, attempt: number): string | null {
    return this.deps.tracing?.activityTraceparent(this.instanceId, activityId, attempt) ?? null;
  }

  webhookLinks() {
    return this.deps.webhookLinks;
  }
}

class Step {
  private readonly instance: InstanceRecord;
  private readonly fence: Fence;
  /** The workflow being advanced (absent in compensation steps). */
  private replaying: ReplayRun | null = null;
  /** Where the look-ahead left the run, for a warm hand-off. */
  private warmNext: ReplayResult | null = null;
  /** Emits this step appended to the stream already (streams.ts). */
  private readonly emitted = new Set<string>();
  private readonly notify: StepNotify;
  /** The instance as activity contexts and hooks name it. */
  private readonly target: { instanceId: string; workflowName: string };

  constructor(
    private readonly deps: StepDeps,
    private readonly leased: LeasedInstance,
    private readonly leaseSeconds: number,
    private readonly scope: DispatchScope | undefined,
    private readonly renewal: Renewal,
  ) {
    this.instance = leased.instance;
    this.fence = leased.fence;
    this.notify = new StepNotify(deps, this.instance.instanceId, scope);
    this.target = { instanceId: this.instance.instanceId, workflowName: this.instance.workflowName };
  }

  /** Replay the workflow and take its next step. */
  async advance(): Promise<StepResult> {
    this.replaying = this.replay();
    const { outcome, newCompensations, newEvents } = await this.replaying.next();
    return this.decideAndCarry(outcome, { records: newEvents, compensations: compensationRows(newCompensations) });
  }

  /** The workflow function running against this step's history. */
  private replay(): ReplayRun {
    const wf = this.deps.workflows.get(this.instance.workflowName)!;
    const state = new ReplayState(this.leased.history, this.deps.errorClasses, this.deps.activities, this.deps.webhookLinks);
    state.values = deferredValues(this.deps.storage, this.instance.instanceId);
    const ctx = createWorkflowContext(this.instance, state, this.deps.clock);
    return new ReplayRun(wf.fn as (c: never, i: unknown) => Promise<unknown>, fromJson(this.instance.inputData), state, ctx);
  }

  /**
   * The app's definition of a compensation. A process that has not run this
   * workflow yet does not know it: replaying the workflow over its history
   * reaches the `registerCompensation` calls again, which add it.
   */
  private async compensationActivity(name: string) {
    const known = this.deps.activities.find(name);
    if (known) return known;
    await this.replay().next();
    return this.deps.activities.find(name);
  }

  /** Continue a run kept in memory by the step that handed us its lease (no history load, no replay). */
  continueWarm(run: ReplayRun, next: ReplayResult): Promise<StepResult> {
    this.replaying = run;
    return this.decideAndCarry(next.outcome, NOTHING_NEW);
  }

  private options(hasStoredCompensations = false): DecideOptions {
    return { handoffLeaseSeconds: this.deps.handoffLeaseSeconds, retryPolicy: this.deps.retryPolicy, hasStoredCompensations, now: this.deps.clock() };
  }

  /** Decide on where the run stopped; `history.records` are rows the run produced itself (recorded values), persisted first. */
  private async decideAndCarry(outcome: StepOutcome, history: StepHistory): Promise<StepResult> {
    // The one fact the decision may need from the database, read only on the path that needs it.
    const stored = needsStoredCompensations(outcome, history) && (await this.deps.storage.listCompensations(this.instance.instanceId)).length > 0;
    return this.carryOut(decide(outcome, history, this.options(stored)));
  }

  /** Carry a plan out: conclude it, or do the I/O it names first. */
  private async carryOut(plan: StepPlan): Promise<StepResult> {
    switch (plan.kind) {
      case "conclude":
        return this.conclude(plan.conclusion, plan.after);
      case "run":
        return this.execute(plan.activities, "activity", plan.history);
      case "compensate":
        return this.runCompensation(plan.activityId, plan.compensation);
      case "wait":
        return this.prepareWait(plan.wait, plan.history);
      case "recur":
        return this.recur(plan.input, plan.history);
      case "park": {
        // Replay diverged from history (usually a deploy that changed the code under running instances): park
        // the instance — visible, nothing recorded, nothing compensated — until other code is deployed (the
        // sweeper resumes it then) or an operator resumes it.
        const parkedHash = await this.deps.definitions.hash(this.deps.workflows.get(this.instance.workflowName)!);
        const p = parkConclusion(plan.error, this.instance.currentActivityId, parkedHash);
        return this.conclude(p.conclusion, p.after);
      }
    }
  }

  /**
   * Register a wait its kind prepares against the database (wait-kinds.ts), in one transaction: a queued
   * message or a finished child is recorded now and the run continues; otherwise the step concludes waiting.
   */
  private async prepareWait(w: WaitRequest, history: StepHistory): Promise<StepResult> {
    await this.appendEmits(this.deps.storage, history.records);
    return this.deps.storage.transaction(async (tx) => {
      const r = await waitKind(w).prepare!(tx, this.instance.instanceId, w, this.deps.clock());
      const p = r.kind === "ready" ? continueWith(w.activityId, history, r.event, this.deps) : waitingPlan(w, history, r, this.deps.clock());
      return this.concludeIn(tx, p.conclusion, p.after);
    });
  }

  /**
   * `ctx.recur(input)`: archive this run's history and start the next run under the same id. The stream
   * is the instance's, not the run's: what this step emitted before recurring is appended first (under
   * the lease, deduplicated by run and operation id like every emit); the other values it recorded end
   * with the run.
   */
  private async recur(input: unknown, history: StepHistory): Promise<StepResult> {
    await this.appendEmits(this.deps.storage, history.records);
    return this.deps.storage.transaction(async (tx) => {
      if (!(await tx.recurInstance(this.fence, toJson(input ?? null)))) throw new LeaseLostError(`lease on ${this.fence.instanceId} lost before recur`);
      return this.concludeIn(tx, { status: "running", currentActivityId: null, handoff: { leaseSeconds: this.deps.handoffLeaseSeconds } }, {});
    });
  }

  /** Run the next pending compensation (newest first); end `failed`/`cancelled` when none is left. */
  async compensate(): Promise<StepResult> {
    const registered = await this.deps.storage.listCompensations(this.instance.instanceId);
    const recorded = new Set(this.leased.history.map((h) => h.activityId));
    const outcome: StepOutcome = { kind: "compensating", registered, recorded, cancelled: this.instance.cancelData !== null, errorData: this.instance.errorData };
    return this.carryOut(decide(outcome, NOTHING_NEW, this.options()));
  }

  private async runCompensation(activityId: string, next: NewCompensation): Promise<StepResult> {
    const def = await this.compensationActivity(next.activityName);
    const state = new ReplayState(this.leased.history, this.deps.errorClasses);
    const failures = state.failedAttempts(activityId);
    const missing = {
      activityName: next.activityName,
      options: { retry: { maxAttempts: 1 } },
      fn: () => {
        throw new Error(`compensation activity "${next.activityName}" is not defined in this app`);
      },
    } as unknown as PendingActivity["activity"];
    const pending = failedSoFar(activityId, def ?? missing, fromJson(next.args) as unknown[], failures);
    return this.execute([pending], "compensation", NOTHING_NEW);
  }

  private async execute(pending: PendingActivity[], kind: "activity" | "compensation", history: StepHistory): Promise<StepResult> {
    const { deps } = this;
    const { storage, hooks } = deps;
    // Compensations registered in this step reach the database before its activities run (one statement, on
    // such steps only): a cancel or deadline landing during a long call sees them, and runs them once the
    // step is over. Persisted with the conclusion alone, they were lost with the fenced-out conclusion.
    if (history.compensations.length > 0 && !(await storage.registerCompensations(this.fence, history.compensations))) {
      throw new LeaseLostError(`lease on ${this.fence.instanceId} lost before the step's activities ran`);
    }
    // What the code emitted before this tick reaches readers before the tick's activities stream.
    await this.appendEmits(storage, history.records);
    for (const p of pending) hooks.onActivityStart?.({ ...this.target, activityId: p.activityId, activityName: p.activity.activityName, attempt: p.attempt });

    // Child starts create instances in the step transaction: their definitions are written before it (PGlite has one connection).
    if (pending.some((p) => p.activity === startChildActivity)) await deps.definitions.ensure(deps.workflows.values());
    const results = new Map<string, ActivityOutcome>();
    const outside = pending.filter((p) => !isTransactional(p));
    const inside = pending.filter(isTransactional);
    if (outside.length > 0) {
      const runOutside = () => Promise.all(outside.map(async (p) => results.set(p.activityId, await this.invoke(p, storage, null))));
      // They wait on the outside world: a dispatcher that bounds steps at once lends this step's slot meanwhile.
      await (this.scope?.outsideSlot ? this.scope.outsideSlot(runOutside) : runOutside());
    }

    const buildConclusion = async () => {
      this.renewal.check();
      const settled: StepOutcome = {
        kind: "settled",
        results: pending.map((p) => ({ pending: p, outcome: results.get(p.activityId)! })),
        as: kind,
        currentActivityId: pending[0]!.activityId,
      };
      let plan = decide(settled, history, this.options());
      // A tick that settled every activity goes on in memory (never in a compensation step).
      if (plan.conclusion.handoff && this.replaying) plan = withLookAhead(plan, await this.lookAhead(pending, plan.conclusion.history!.slice(history.records.length)));
      return plan;
    };

    if (inside.length === 0) {
      const { conclusion, after } = await buildConclusion();
      return this.conclude(conclusion, after);
    }

    try {
      // The non-transactional activities may have run long: start nothing more once the lease is gone.
      this.renewal.check();
      return await storage.transaction(async (tx) => {
        const txExecutor = tx.executor as Transaction;
        if (inside.length === 1) {
          const p = inside[0]!;
          const outcome = await this.invoke(p, tx, txExecutor, (cb) => tx.afterCommit(cb));
          if (!outcome.ok) throw new ActivityRollback(outcome);
          results.set(p.activityId, outcome);
        } else {
          for (const p of inside) {
            this.renewal.check();
            let outcome: ActivityOutcome | null = null;
            try {
              await tx.transaction(async (sp) => {
                const o = await this.invoke(p, sp, sp.executor as Transaction, (cb) => sp.afterCommit(cb));
                outcome = o;
                if (!o.ok) throw new ActivityRollback(o);
              });
            } catch (e) {
              if (!(e instanceof ActivityRollback)) throw e;
            }
            results.set(p.activityId, outcome!);
          }
        }
        const { conclusion, after } = await buildConclusion();
        return this.concludeIn(tx, conclusion, after);
      });
    } catch (e) {
      if (!(e instanceof ActivityRollback)) throw e;
      // The lone transactional activity threw: its writes are rolled back; record the failure alone.
      results.set(inside[0]!.activityId, e.outcome);
      const { conclusion, after } = await buildConclusion();
      return this.conclude(conclusion, after);
    }
  }

  /**
   * Run one activity attempt with its stream (stream-writer.ts): its batches go outside the step's
   * transaction where the database has more than one connection, through it on PGlite. The stream is
   * drained before the outcome is recorded; a refusal the activity did not see fails the attempt.
   */
  private async invoke(p: PendingActivity, storage: Storage, tx: Transaction | null, afterCommit?: (cb: () => void) => void): Promise<ActivityOutcome> {
    const root = this.deps.storage;
    const writer = new StreamWriter({
      storage: tx && root.concurrent === false ? storage : root,
      fence: this.fence,
      run: this.instance.run,
      activityId: p.activityId,
      attempt: p.attempt,
      maxBytes: this.deps.streamMaxBytes,
    });
    const outcome = await invoke(p, makeActivityContext(this.target, p, storage, tx, this.notify, this.renewal, afterCommit, writer));
    const unseen = await writer.drain();
    if (unseen && outcome.ok) return { ok: false, error: unseen };
    // A result by reference that would take the instance past its bound fails the attempt (never retried), like one over MAX_VALUE_BYTES.
    const over = outcome.ok && outcome.data ? await overInstanceBound(storage, this.instance.instanceId, `the result of activity "${p.activity.activityName}"`, outcome.data) : null;
    return over ? { ok: false, error: over } : outcome;
  }

  /** The run's emits among `records`, appended under this step's lease (streams.ts). */
  private appendEmits(storage: Storage, records: readonly NewHistoryEvent[] | undefined): Promise<void> {
    return appendEmits(storage, this.fence, this.instance.run, records, this.emitted);
  }

  /**
   * Continue the run in memory with this step's new records, up to the next
   * unrecorded operation (decide.ts `withLookAhead` folds what it produced
   * into this conclusion); where it stopped is kept for a warm hand-off.
   */
  private async lookAhead(pending: PendingActivity[], newEvents: NewHistoryEvent[]): Promise<ReplayResult | null> {
    const now = new Date();
    const r = await this.replaying!.resume(
      pending,
      newEvents.map((e, i) => ({ ...e, id: -1 - i, createdAt: now })),
    );
    this.warmNext = r && r.outcome.kind !== "completed" ? { outcome: r.outcome, newCompensations: [], newEvents: [] } : null;
    return r;
  }

  /** Conclude with one fenced statement (no transaction needed), then run post-commit work. */
  private async conclude(c: StepConclusion, after: AfterCommit): Promise<StepResult> {
    // A child's final conclusion reports to its parent in the same transaction (concludeIn).
    if (reportsToParent(this.instance, c.status)) return this.deps.storage.transaction((tx) => this.concludeIn(tx, c, after));
    await this.appendEmits(this.deps.storage, c.history);
    const r = await this.concludeAlone(c);
    if (!r.ok) throw new LeaseLostError(`lease on ${this.fence.instanceId} lost before the step concluded`);
    this.afterConclusion(c, r.token, after);
    return { status: "concluded", instanceStatus: c.status };
  }

  private async concludeIn(tx: TxStorage, c: StepConclusion, after: AfterCommit): Promise<StepResult> {
    const reports = reportsToParent(this.instance, c.status);
    // Lock order: the parent's row before this (child) row, as everywhere (storage/lifecycle.ts).
    if (reports) await tx.lockInstanceRow(this.instance.parentInstanceId!);
    // In the conclusion's transaction: a write outside it would wait for it on PGlite.
    await this.appendEmits(tx, c.history);
    // Nothing follows the conclusion unless a parent is told: it is the last statement, and a pipelining driver
    // sends COMMIT behind it (or the conclusion alone, autocommitted, when the activity never touched ctx.tx:
    // then with other steps' lone conclusions, group-commit.ts, when the transaction hands it over).
    const alone = !reports && this.deps.groupCommit !== null && sendLastAlone(tx.executor);
    const r = alone ? await this.concludeAlone(c) : await tx.concludeStep(this.fence, c, { last: !reports });
    if (!r.ok) throw new LeaseLostError(`lease on ${this.fence.instanceId} lost before the step concluded`);
    if (reports) {
      await deliverToParent(this.deps, tx, this.instance, c.status, c.outputData ?? this.instance.outputData, c.errorData ?? this.instance.errorData, this.scope);
    }
    tx.afterCommit(() => this.afterConclusion(c, r.token, after));
    return { status: "concluded", instanceStatus: c.status };
  }

  /** A lone conclusion: grouped with others of this turn (group-commit.ts), or one statement of its own. */
  private concludeAlone(c: StepConclusion) {
    const group = this.deps.groupCommit;
    return group ? group.conclude(this.fence, c) : this.deps.storage.concludeStep(this.fence, c);
  }

  private afterConclusion(c: StepConclusion, token: number | undefined, after: AfterCommit) {
    // An ended instance of a keyed workflow frees its slot at once (the sweeper catches what this misses).
    if (c.status === "completed" || c.status === "failed" || c.status === "cancelled") slotFreed(this.deps, this.target, this.scope);
    if (c.handoff && token !== undefined) {
      if (this.warmNext && this.replaying) {
        this.deps.warmRuns.put(this.fence.instanceId, {
          workerId: this.fence.workerId,
          token,
          instance: this.instance,
          run: this.replaying,
          next: this.warmNext,
          expiresAt: Date.now() + this.deps.handoffLeaseSeconds * 1000 * 0.8,
        });
      }
      this.deps.dispatcher.dispatch({ instanceId: this.fence.instanceId, lease: { workerId: this.fence.workerId, token } }, this.scope);
    }
    try {
      this.runAfter(after);
    } catch (err) {
      console.error("edda: hook failed", err);
    }
  }

  /** The plan's post-commit part: activity hooks, an in-process wake-up, the workflow's hook. */
  private runAfter(after: AfterCommit) {
    const { hooks, dispatcher } = this.deps;
    const activityHooks = hooks.onActivityComplete || hooks.onActivityRetry || hooks.onActivityFailed;
    for (const e of activityHooks ? (after.activities ?? []) : []) {
      const info = { ...this.target, activityId: e.pending.activityId, activityName: e.pending.activity.activityName, attempt: e.pending.attempt };
      if (e.outcome.ok) hooks.onActivityComplete?.({ ...info, result: e.outcome.value });
      else if (!e.final) hooks.onActivityRetry?.({ ...info, error: e.outcome.error, retryInSeconds: e.retryInSeconds! });
      else hooks.onActivityFailed?.({ ...info, error: e.outcome.error });
    }
    if (after.wakeInSeconds !== undefined) dispatcher.wakeIn?.(after.wakeInSeconds, this.scope);
    if (after.warn) console.warn(`edda: instance ${this.instance.instanceId} ${after.warn}`);
    const w = after.workflow;
    if (w?.kind === "completed") hooks.onWorkflowComplete?.({ ...this.target, output: w.output });
    else if (w?.kind === "failed") hooks.onWorkflowFailed?.({ ...this.target, error: w.error });
    else if (w?.kind === "cancelled") hooks.onWorkflowCancelled?.({ ...this.target });
  }
}

const NOTHING_NEW: StepHistory = { records: [], compensations: [] };
