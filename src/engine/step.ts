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
import { LeaseLostError, NonDeterminismError } from "../core/errors.ts";
import { createWorkflowContext } from "../core/operation.ts";
import { failedSoFar, ReplayRun, ReplayState, type PendingActivity, type ReplayOutcome, type ReplayResult, type WaitRequest } from "../core/replay.ts";
import type { WarmRun } from "./warm-runs.ts";
import { prepareMessageWait } from "./channels.ts";
import { fromJson, instanceErrorData, toJson } from "../core/serialization.ts";
import type { Fence, InstanceRecord, LeasedInstance, NewCompensation, NewHistoryEvent, StepConclusion, Storage, TxStorage } from "../storage/types.ts";
import { deliverToParent, prepareChildWait, reportsToParent, startChildIn } from "./lifecycle.ts";
import { startChildActivity } from "./children.ts";
import { slotFreed } from "./flow-control.ts";
import type { DispatchScope, StepRequest } from "./dispatcher.ts";
import type { Engine } from "./engine.ts";
import { isConnectionLost, stepFailed } from "./poison.ts";
import { invoke, isTransactional, makeActivityContext, recordOutcomes, type ActivityNotify, type ActivityOutcome } from "./execute.ts";

const isTx = (s: Storage): s is TxStorage => typeof (s as Partial<TxStorage>).afterCommit === "function";

export type StepResult =
  | { status: "skipped"; reason: string }
  | { status: "lease_lost" }
  | { status: "concluded"; instanceStatus: string };

/** Thrown out of the step transaction to roll back a lone activity's writes. */
class ActivityRollback {
  constructor(readonly outcome: ActivityOutcome) {}
}

export async function runStep(engine: Engine, req: StepRequest, scope?: DispatchScope): Promise<StepResult> {
  const { storage } = engine;
  let leased: LeasedInstance | null = null;
  // Checked before any await: a follow-up dispatched in-process may start at once.
  const warm = req.lease ? engine.warmRuns.take(req.instanceId, req.lease) : null;
  if (warm) leased = { instance: warm.instance, fence: { instanceId: req.instanceId, ...req.lease! }, history: [] };
  if (req.lease && !leased) leased = await storage.loadLeased({ instanceId: req.instanceId, ...req.lease });
  leased ??= await storage.acquireLease(req.instanceId, engine.workerId, engine.defaultLeaseSeconds, { withHistory: true });
  if (!leased) return { status: "skipped", reason: "not runnable, finished, or leased by another worker" };

  const wf = engine.workflows.get(leased.instance.workflowName);
  if (!wf) {
    await storage.releaseLease(leased.fence);
    return { status: "skipped", reason: `workflow "${leased.instance.workflowName}" is not registered in this app` };
  }
  const leaseSeconds = wf.options.lockTimeoutSeconds ?? leased.instance.lockTimeoutSeconds ?? engine.defaultLeaseSeconds;
  const renewal = startRenewal(storage, leased.fence, leaseSeconds, engine.handoffLeaseSeconds);
  try {
    const step = new Step(engine, leased, leaseSeconds, scope, renewal);
    if (warm) return await step.continueWarm(warm);
    return leased.instance.status === "compensating" ? await step.compensate() : await step.advance();
  } catch (err) {
    engine.warmRuns.drop(req.instanceId);
    if (err instanceof LeaseLostError) return { status: "lease_lost" };
    // Unexpected (database down, a value that cannot be stored…): the lease goes back so the
    // instance is retried soon; a failure that is not transient counts towards quarantine.
    await stepFailed(storage, leased.fence, err, engine.quarantineAfter);
    // The connection went away under the step (a killed backend, a server restart): its lease was just
    // given back, so run it again shortly instead of leaving it to the next sweep. A step that cannot
    // take the lease (the release failed too) is skipped, and the sweep resumes the instance later.
    if (isConnectionLost(err)) redispatchSoon(engine, req.instanceId, scope);
    throw err;
  } finally {
    renewal.stop();
  }
}

/** A short pause first: the pool replaces the dead connection, and a server that is restarting gets a moment. */
const REDISPATCH_DELAY_MS = 250;

function redispatchSoon(engine: Engine, instanceId: string, scope?: DispatchScope): void {
  const p = new Promise<void>((resolve) => {
    const t = setTimeout(() => {
      engine.dispatcher.dispatch({ instanceId }, scope);
      resolve();
    }, REDISPATCH_DELAY_MS);
    (t as { unref?: () => void }).unref?.();
  });
  scope?.waitUntil?.(p);
}

interface Renewal {
  stop(): void;
  /** Throws LeaseLostError once a renewal found the lease gone (expired and taken, or cancelled). */
  check(): void;
  /** Aborted (with a LeaseLostError) when a renewal finds the lease gone: the activities' `ctx.signal`. */
  readonly signal: AbortSignal;
}

/**
 * Renew the lease while a long activity runs; stops at the step's end. A
 * renewal that matches no row means someone else owns the instance now: the
 * step starts nothing more (no further activity, no look-ahead) and ends
 * `lease_lost`. A renewal that fails for another reason (the database
 * briefly unreachable) is not a loss: the fenced conclusion still decides.
 */
function startRenewal(storage: Storage, fence: Fence, leaseSeconds: number, handoffSeconds: number): Renewal {
  const everyMs = (Math.min(leaseSeconds, handoffSeconds) * 1000) / 3;
  const aborter = new AbortController();
  const lostError = () => new LeaseLostError(`lease on ${fence.instanceId} lost while the step ran`);
  const timer = setInterval(() => {
    storage.renewLease(fence, leaseSeconds).then(
      (ok) => {
        if (!ok && !aborter.signal.aborted) {
          clearInterval(timer);
          aborter.abort(lostError());
        }
      },
      () => undefined,
    );
  }, everyMs);
  (timer as { unref?: () => void }).unref?.();
  return {
    stop: () => clearInterval(timer),
    check: () => {
      if (aborter.signal.aborted) throw lostError();
    },
    signal: aborter.signal,
  };
}

class Step {
  private readonly instance: InstanceRecord;
  private readonly fence: Fence;
  /** The workflow being advanced (absent in compensation steps). */
  private replaying: ReplayRun | null = null;
  /** Where the look-ahead left the run, for a warm hand-off. */
  private warmNext: ReplayResult | null = null;

  constructor(
    private readonly engine: Engine,
    private readonly leased: LeasedInstance,
    private readonly leaseSeconds: number,
    private readonly scope: DispatchScope | undefined,
    private readonly renewal: Renewal,
  ) {
    this.instance = leased.instance;
    this.fence = leased.fence;
  }

  private readonly notify: ActivityNotify = {
    published: (channel: string) => this.engine.notifyPublished(channel, this.scope),
    outbox: (eventIds: string[]) => this.engine.notifyOutbox(eventIds, this.scope),
    startChild: (storage, start) =>
      startChildIn(this.engine, storage, this.instance.instanceId, start, (cb) => (isTx(storage) ? storage.afterCommit(cb) : cb()), this.scope),
    traceparent: (activityId: string, attempt: number) => this.engine.tracing?.activityTraceparent(this.instance.instanceId, activityId, attempt) ?? null,
  };

  private get target() {
    return { instanceId: this.instance.instanceId, workflowName: this.instance.workflowName };
  }

  /** Replay the workflow and take its next step. */
  async advance(): Promise<StepResult> {
    this.replaying = this.replay();
    const { outcome, newCompensations, newEvents } = await this.replaying.next();
    return this.take(outcome, compensationRows(newCompensations), newEvents);
  }

  /** The workflow function running against this step's history. */
  private replay(): ReplayRun {
    const wf = this.engine.workflows.get(this.instance.workflowName)!;
    const state = new ReplayState(this.leased.history, this.engine.errorClasses, this.engine.activities);
    const ctx = createWorkflowContext(this.instance, state);
    return new ReplayRun(wf.fn as (c: never, i: unknown) => Promise<unknown>, fromJson(this.instance.inputData), state, ctx);
  }

  /**
   * The app's definition of a compensation. A process that has not run this
   * workflow yet does not know it: replaying the workflow over its history
   * reaches the `registerCompensation` calls again, which add it.
   */
  private async compensationActivity(name: string) {
    const known = this.engine.activities.find(name);
    if (known) return known;
    await this.replay().next();
    return this.engine.activities.find(name);
  }

  /** Continue a run kept in memory by the step that handed us its lease (no history load, no replay). */
  continueWarm(warm: WarmRun): Promise<StepResult> {
    this.replaying = warm.run;
    return this.take(warm.next.outcome, [], []);
  }

  /** Act on where the run stopped; `events` are rows the run produced itself (recorded values), persisted first. */
  private async take(outcome: ReplayOutcome, compensations: NewCompensation[], events: NewHistoryEvent[]): Promise<StepResult> {
    switch (outcome.kind) {
      case "completed":
        return this.conclude({ status: "completed", currentActivityId: null, history: events, outputData: toJson(outcome.output) }, () =>
          this.engine.hooks.onWorkflowComplete?.({ ...this.target, output: outcome.output }),
        );
      case "failed":
        return this.fail(outcome.error, compensations, events);
      case "nondeterminism":
        return this.park(outcome.error, events);
      case "wait": {
        const w = outcome.wait;
        if (w.kind === "timer") {
          return this.conclude(
            {
              status: "waiting_for_timer",
              currentActivityId: w.activityId,
              history: events,
              compensations,
              timer: { timerId: w.activityId, activityId: w.activityId, ...(w.expiresAt ? { expiresAt: w.expiresAt } : { delaySeconds: w.delaySeconds ?? 0 }) },
            },
            () => this.engine.dispatcher.wakeIn?.(w.expiresAt ? Math.max(0, (w.expiresAt.getTime() - Date.now()) / 1000) : (w.delaySeconds ?? 0), this.scope),
          );
        }
        if (w.kind === "child") return this.waitForChild(w, compensations, events);
        return this.waitForMessage(w, compensations, events);
      }
      case "recur":
        return this.recur(outcome.input);
      case "activities":
        return this.execute(outcome.activities, compensations, "activity", events);
    }
  }

  /** Receive now if a message is queued, else wait (subscription marked waiting, lease released). */
  private async waitForMessage(w: Extract<WaitRequest, { kind: "message" }>, compensations: NewCompensation[], events: NewHistoryEvent[]): Promise<StepResult> {
    return this.engine.storage.transaction(async (tx) => {
      const r = await prepareMessageWait(tx, this.instance.instanceId, w);
      if (r.kind === "waiting") {
        return this.concludeIn(tx, { status: "waiting_for_message", currentActivityId: w.activityId, history: events, compensations }, () => {
          if (r.timeoutSeconds !== null) this.engine.dispatcher.wakeIn?.(r.timeoutSeconds, this.scope);
        });
      }
      return this.continueWith(tx, w.activityId, [...events, r.event], compensations);
    });
  }

  /** A finished child's outcome is recorded now; otherwise wait until the child's conclusion records it (lifecycle.ts). */
  private async waitForChild(w: Extract<WaitRequest, { kind: "child" }>, compensations: NewCompensation[], events: NewHistoryEvent[]): Promise<StepResult> {
    return this.engine.storage.transaction(async (tx) => {
      const r = await prepareChildWait(tx, this.instance.instanceId, w);
      if (r.kind === "waiting") return this.concludeIn(tx, { status: "waiting_for_child", currentActivityId: w.activityId, history: events, compensations });
      return this.continueWith(tx, w.activityId, [...events, r.event], compensations);
    });
  }

  /**
   * Replay diverged from history (NonDeterminismError, usually a deploy that
   * changed the code under running instances): park the instance — visible,
   * nothing recorded, nothing compensated — until other code is deployed
   * (the sweeper resumes it then) or an operator resumes it.
   */
  private async park(error: NonDeterminismError, events: NewHistoryEvent[]): Promise<StepResult> {
    const wf = this.engine.workflows.get(this.instance.workflowName)!;
    const parkedHash = await this.engine.definitionHash(wf);
    // Values recorded before the divergence are dropped with it: the fixed code records its own.
    void events;
    return this.conclude({ status: "parked", currentActivityId: this.instance.currentActivityId, errorData: instanceErrorData(error), parkedHash }, () =>
      console.warn(`edda: instance ${this.instance.instanceId} parked: ${error.message}`),
    );
  }

  /** `ctx.recur(input)`: archive this run's history and start the next run under the same id. */
  private async recur(input: unknown): Promise<StepResult> {
    return this.engine.storage.transaction(async (tx) => {
      if (!(await tx.recurInstance(this.fence, toJson(input ?? null)))) throw new LeaseLostError(`lease on ${this.fence.instanceId} lost before recur`);
      return this.concludeIn(tx, { status: "running", currentActivityId: null, handoff: { leaseSeconds: this.engine.handoffLeaseSeconds } });
    });
  }

  /** The workflow failed: compensate (if anything is registered) or end `failed`. */
  private async fail(error: unknown, compensations: NewCompensation[], events: NewHistoryEvent[]): Promise<StepResult> {
    const errorData = instanceErrorData(error);
    const hasCompensations = compensations.length > 0 || (await this.engine.storage.listCompensations(this.instance.instanceId)).length > 0;
    if (hasCompensations && !(error instanceof NonDeterminismError)) {
      return this.conclude({ status: "compensating", currentActivityId: null, history: events, errorData, compensations, handoff: { leaseSeconds: this.engine.handoffLeaseSeconds } });
    }
    return this.conclude({ status: "failed", currentActivityId: null, history: events, errorData, compensations }, () =>
      this.engine.hooks.onWorkflowFailed?.({ ...this.target, error }),
    );
  }

  /** Run the next pending compensation (newest first); end `failed`/`cancelled` when none is left. */
  async compensate(): Promise<StepResult> {
    const comps = await this.engine.storage.listCompensations(this.instance.instanceId);
    const done = new Set(this.leased.history.map((h) => h.activityId));
    const next = comps.find((c) => !done.has(`compensate:${c.activityId}`));
    if (!next) {
      const cancelled = this.instance.cancelData !== null;
      return this.conclude({ status: cancelled ? "cancelled" : "failed", currentActivityId: null }, () =>
        cancelled
          ? this.engine.hooks.onWorkflowCancelled?.({ ...this.target })
          : this.engine.hooks.onWorkflowFailed?.({ ...this.target, error: this.instance.errorData ? JSON.parse(this.instance.errorData) : null }),
      );
    }
    const activityId = `compensate:${next.activityId}`;
    const def = await this.compensationActivity(next.activityName);
    const state = new ReplayState(this.leased.history, this.engine.errorClasses);
    const failures = state.failedAttempts(activityId);
    const missing = {
      activityName: next.activityName,
      options: { retry: { maxAttempts: 1 } },
      fn: () => {
        throw new Error(`compensation activity "${next.activityName}" is not defined in this app`);
      },
    } as unknown as PendingActivity["activity"];
    const pending = failedSoFar(activityId, def ?? missing, fromJson(next.args) as unknown[], failures);
    return this.execute([pending], [], "compensation", []);
  }

  private async execute(pending: PendingActivity[], compensations: NewCompensation[], kind: "activity" | "compensation", events: NewHistoryEvent[]): Promise<StepResult> {
    const { engine } = this;
    const { storage, hooks } = engine;
    for (const p of pending) hooks.onActivityStart?.({ ...this.target, activityId: p.activityId, activityName: p.activity.activityName, attempt: p.attempt });

    // Child starts create instances in the step transaction: their definitions are written before it (PGlite has one connection).
    if (pending.some((p) => p.activity === startChildActivity)) await engine.ensureDefinitions(engine.workflows.values());
    const results = new Map<string, ActivityOutcome>();
    const outside = pending.filter((p) => !isTransactional(p));
    const inside = pending.filter(isTransactional);
    await Promise.all(
      outside.map(async (p) => results.set(p.activityId, await invoke(p, makeActivityContext(this.target, p, storage, null, this.notify, this.renewal.signal)))),
    );

    const buildConclusion = async () => {
      this.renewal.check();
      const rec = recordOutcomes(
        pending.map((p) => ({ pending: p, outcome: results.get(p.activityId)! })),
        engine.retryPolicy,
        kind,
      );
      let conclusion: StepConclusion = {
        status: rec.retryTimer ? "waiting_for_timer" : kind === "compensation" ? "compensating" : "running",
        currentActivityId: pending[0]!.activityId,
        history: [...events, ...rec.history],
        compensations: [...compensations, ...rec.compensations],
        ...(rec.retryTimer ? { timer: rec.retryTimer } : { handoff: { leaseSeconds: engine.handoffLeaseSeconds } }),
      };
      let completedOutput: { output: unknown } | null = null;
      if (!rec.retryTimer && this.replaying) {
        const ahead = await this.lookAhead(pending, rec.history);
        conclusion.compensations!.push(...ahead.compensations);
        conclusion.history!.push(...ahead.events);
        if (ahead.completed) {
          completedOutput = ahead.completed;
          conclusion = { ...conclusion, status: "completed", currentActivityId: null, outputData: toJson(ahead.completed.output) };
          delete conclusion.handoff;
        }
      }
      const after = () => {
        for (const e of rec.events) {
          const info = { ...this.target, activityId: e.pending.activityId, activityName: e.pending.activity.activityName, attempt: e.pending.attempt };
          if (e.outcome.ok) hooks.onActivityComplete?.({ ...info, result: e.outcome.value });
          else if (!e.final) hooks.onActivityRetry?.({ ...info, error: e.outcome.error, retryInSeconds: e.retryInSeconds! });
          else hooks.onActivityFailed?.({ ...info, error: e.outcome.error });
        }
        if (rec.retryTimer) engine.dispatcher.wakeIn?.(rec.retryTimer.delaySeconds ?? 0, this.scope);
        if (completedOutput) hooks.onWorkflowComplete?.({ ...this.target, output: completedOutput.output });
      };
      return { conclusion, after };
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
          const outcome = await invoke(p, makeActivityContext(this.target, p, tx, txExecutor, this.notify, this.renewal.signal, (cb) => tx.afterCommit(cb)));
          if (!outcome.ok) throw new ActivityRollback(outcome);
          results.set(p.activityId, outcome);
        } else {
          for (const p of inside) {
            this.renewal.check();
            let outcome: ActivityOutcome | null = null;
            try {
              await tx.transaction(async (sp) => {
                const o = await invoke(p, makeActivityContext(this.target, p, sp, sp.executor as Transaction, this.notify, this.renewal.signal, (cb) => sp.afterCommit(cb)));
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
   * Continue the run in memory with this step's new records, up to the next
   * unrecorded operation: compensations registered right after the activity
   * are persisted in the same commit as its result (so a cancel landing
   * during the next step still sees them), and a workflow that returns right
   * after its last activity completes in this step instead of the next.
   */
  private async lookAhead(
    pending: PendingActivity[],
    newEvents: NewHistoryEvent[],
  ): Promise<{ compensations: NewCompensation[]; events: NewHistoryEvent[]; completed: { output: unknown } | null }> {
    const now = new Date();
    const r = await this.replaying!.resume(
      pending,
      newEvents.map((e, i) => ({ ...e, id: -1 - i, createdAt: now })),
    );
    this.warmNext = r && r.outcome.kind !== "completed" ? { outcome: r.outcome, newCompensations: [], newEvents: [] } : null;
    if (!r) return { compensations: [], events: [], completed: null };
    const { outcome, newCompensations, newEvents: produced } = r;
    return {
      compensations: compensationRows(newCompensations),
      events: produced,
      completed: outcome.kind === "completed" ? { output: outcome.output } : null,
    };
  }

  /** Conclude with one fenced statement (no transaction needed), then run post-commit work. */
  private async conclude(c: StepConclusion, after?: () => void): Promise<StepResult> {
    // A child's final conclusion reports to its parent in the same transaction (concludeIn).
    if (reportsToParent(this.instance, c.status)) return this.engine.storage.transaction((tx) => this.concludeIn(tx, c, after));
    const r = await this.engine.storage.concludeStep(this.fence, c);
    if (!r.ok) throw new LeaseLostError(`lease on ${this.fence.instanceId} lost before the step concluded`);
    this.afterConclusion(c, r.token, after);
    return { status: "concluded", instanceStatus: c.status };
  }

  /** The awaited outcome is already recorded: hand the lease to a follow-up that replays past it. */
  private continueWith(tx: TxStorage, activityId: string, history: NewHistoryEvent[], compensations: NewCompensation[]): Promise<StepResult> {
    return this.concludeIn(tx, { status: "running", currentActivityId: activityId, history, compensations, handoff: { leaseSeconds: this.engine.handoffLeaseSeconds } });
  }

  private async concludeIn(tx: TxStorage, c: StepConclusion, after?: () => void): Promise<StepResult> {
    const reports = reportsToParent(this.instance, c.status);
    // Lock order: the parent's row before this (child) row, as everywhere (storage/lifecycle.ts).
    if (reports) await tx.lockInstanceRow(this.instance.parentInstanceId!);
    const r = await tx.concludeStep(this.fence, c);
    if (!r.ok) throw new LeaseLostError(`lease on ${this.fence.instanceId} lost before the step concluded`);
    if (reports) {
      await deliverToParent(this.engine, tx, this.instance, c.status, c.outputData ?? this.instance.outputData, c.errorData ?? this.instance.errorData, this.scope);
    }
    tx.afterCommit(() => this.afterConclusion(c, r.token, after));
    return { status: "concluded", instanceStatus: c.status };
  }

  private afterConclusion(c: StepConclusion, token: number | undefined, after?: () => void) {
    // An ended instance of a keyed workflow frees its slot at once (the sweeper catches what this misses).
    if (c.status === "completed" || c.status === "failed" || c.status === "cancelled") slotFreed(this.engine, this.target, this.scope);
    if (c.handoff && token !== undefined) {
      if (this.warmNext && this.replaying) {
        this.engine.warmRuns.put(this.fence.instanceId, {
          workerId: this.fence.workerId,
          token,
          instance: this.instance,
          run: this.replaying,
          next: this.warmNext,
          expiresAt: Date.now() + this.engine.handoffLeaseSeconds * 1000 * 0.8,
        });
      }
      this.engine.dispatcher.dispatch({ instanceId: this.fence.instanceId, lease: { workerId: this.fence.workerId, token } }, this.scope);
    }
    try {
      after?.();
    } catch (err) {
      console.error("edda: hook failed", err);
    }
  }
}

function compensationRows(regs: ReplayResult["newCompensations"]): NewCompensation[] {
  return regs.map((c) => ({ activityId: c.activityId, activityName: c.activityName, args: toJson(c.args) }));
}
