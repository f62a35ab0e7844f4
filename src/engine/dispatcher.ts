/**
 * Dispatchers decide how a follow-up step is triggered after a commit. The
 * database is the source of truth: a lost dispatch only delays work until the
 * sweeper finds the instance (runnable, or its handed-off lease expired).
 *
 * - `LocalDispatcher`: an in-process queue (Node, embedded PGlite, tests).
 * - `HttpDispatcher` (http-dispatcher.ts): a signed request to the app's own
 *   `POST /_edda/step` (Workers without a queue, Deno without KV).
 * - `QueueDispatcher` (queue-dispatcher.ts): messages on a platform queue
 *   (Cloudflare Queues, Deno KV queues), consumed by top-level invocations.
 *
 * Every call carries the invocation's `DispatchScope`: the engine that
 * dispatches (per-request engines each pass themselves, so none replaces
 * another), the invocation's subrequest budget and how many follow-up hops
 * led to it.
 */
import { logError } from "../core/log.ts";
import { SubrequestBudget } from "./budget.ts";

export { SubrequestBudget };

export interface StepRequest {
  instanceId: string;
  /** A lease handed over by the concluding step: the follow-up starts with a read. */
  lease?: { workerId: string; token: number };
  /** W3C traceparent of the run's trace: the step joins it (every transport carries it as is). */
  traceparent?: string;
}

/** What one invocation (request, cron run, queue batch) shares across everything it dispatches. */
export interface DispatchScope {
  /** Workers' `ctx.waitUntil`: keeps post-response work alive. */
  waitUntil?(promise: Promise<unknown>): void;
  /** Outgoing fetches this invocation may still make (follow-ups, outbox, queue sends). */
  budget?: SubrequestBudget;
  /** Follow-up hops that led to this invocation: 0 for a client request, a cron run or a queue batch. */
  hop?: number;
  /** The engine dispatching; its steps run on it (and its database). */
  runner?: StepRunner;
  /**
   * Set by a dispatcher that bounds the steps it runs at once (local): the step runs `io` — its
   * non-transactional activities, which wait on the outside world (an LLM, a partner API) and hold no
   * connection — without holding a slot, and takes one back, ahead of the queued steps, to conclude.
   */
  outsideSlot?<T>(io: () => Promise<T>): Promise<T>;
}

export interface StepRunner {
  runStep(req: StepRequest, scope?: DispatchScope): Promise<unknown>;
  /** Fire due timers and dispatch what they woke. */
  fireDueTimers(scope?: DispatchScope): Promise<number>;
  /**
   * A follow-up that will not be sent (hop bound, budget spent): give its
   * handed lease back so the instance is runnable for the next sweep at once.
   */
  deferStep?(req: StepRequest): Promise<void>;
  /**
   * Take a short lease on a runnable, unlocked instance for a follow-up about to
   * leave the process (http-dispatcher.ts), or null when there is nothing to run:
   * a request that names a lease is single-use (step.ts), so a captured one
   * replayed runs nothing.
   */
  handOff?(instanceId: string): Promise<{ workerId: string; token: number } | null>;
}

export interface Dispatcher {
  /** Default runner for dispatches whose scope names none (the first attached wins). */
  attach(runner: StepRunner): void;
  /** Trigger a step soon. Never throws. */
  dispatch(req: StepRequest, scope?: DispatchScope): void;
  /** Hint that a timer becomes due in `delaySeconds` (short sleeps, retry backoff). */
  wakeIn?(delaySeconds: number, scope?: DispatchScope): void;
  /** Stop accepting work and wait for in-flight steps. */
  close?(): Promise<void>;
}

/** Hand a follow-up that will not be sent back to the database (logged, never thrown). */
export function deferStep(req: StepRequest, scope: DispatchScope | undefined, why: string): void {
  const runner = scope?.runner;
  if (!scope || !runner?.deferStep) return;
  const p = runner.deferStep(req).catch((err: unknown) => console.error(`edda: could not release ${req.instanceId} (${why}); its lease expires instead`, err));
  scope.waitUntil?.(p);
}

/** LocalDispatcherOptions.concurrency by default. */
export const DEFAULT_LOCAL_CONCURRENCY = 8;

export interface LocalDispatcherOptions {
  /**
   * Steps run at once (default 8): replaying, waiting on the database, running transactional
   * activities. A step waiting on its non-transactional activities holds no slot meanwhile, so slow
   * external calls never keep short steps waiting.
   */
  concurrency?: number;
  /** Timers further out than this are left to the sweeper (default 300 s). */
  maxWakeSeconds?: number;
}

interface Queued {
  req: StepRequest;
  scope: DispatchScope | undefined;
  runner: StepRunner;
  done: () => void;
}

export class LocalDispatcher implements Dispatcher {
  private runner: StepRunner | null = null;
  private readonly queue: Queued[] = [];
  /** Slots taken: steps and timer firings running, less the steps waiting outside their slot. */
  private running = 0;
  /** Steps and timer firings started and not finished (what `idle()` waits for). */
  private inFlight = 0;
  /** Steps whose outside work is done, waiting for a slot back (served before the queue). */
  private readonly resuming: (() => void)[] = [];
  private closed = false;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly wakeSlots = new Map<number, Set<StepRunner>>();
  private idleWaiters: (() => void)[] = [];
  private readonly concurrency: number;
  private readonly maxWakeSeconds: number;

  constructor(opts: LocalDispatcherOptions = {}) {
    this.concurrency = Math.max(1, Math.trunc(opts.concurrency ?? DEFAULT_LOCAL_CONCURRENCY));
    this.maxWakeSeconds = opts.maxWakeSeconds ?? 300;
  }

  attach(runner: StepRunner): void {
    this.runner ??= runner;
  }

  dispatch(req: StepRequest, scope?: DispatchScope): void {
    const runner = scope?.runner ?? this.runner;
    if (this.closed || !runner) return;
    // A per-request engine closes its database once the request's background work is done: the step is part of it.
    // The step runs in the dispatching invocation's scope, so what it dispatches in turn is part of that work too.
    scope?.waitUntil?.(new Promise<void>((done) => this.queue.push({ req, scope, runner, done })));
    if (!scope?.waitUntil) this.queue.push({ req, scope, runner, done: () => {} });
    this.pump();
  }

  wakeIn(delaySeconds: number, scope?: DispatchScope): void {
    const runner = scope?.runner ?? this.runner;
    if (this.closed || !runner || delaySeconds > this.maxWakeSeconds) return;
    // One wake-up per 20 ms slot: a burst of sleeps due together needs one firing pass, not one each.
    const slot = Math.ceil((Date.now() + Math.max(0, delaySeconds * 1000)) / 20) * 20;
    const runners = this.wakeSlots.get(slot);
    if (runners) {
      runners.add(runner);
      return;
    }
    this.wakeSlots.set(slot, new Set([runner]));
    const t = setTimeout(() => {
      this.timers.delete(t);
      const due = this.wakeSlots.get(slot) ?? new Set<StepRunner>();
      this.wakeSlots.delete(slot);
      if (!this.closed) for (const r of due) this.track(r.fireDueTimers());
    }, slot - Date.now() + 5);
    (t as { unref?: () => void }).unref?.();
    this.timers.add(t);
  }

  /** Resolves when no step is queued or running (tests, graceful shutdown). */
  idle(): Promise<void> {
    if (this.inFlight === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.wakeSlots.clear();
    for (const q of this.queue.splice(0)) q.done();
    await this.idle();
  }

  /** Runs one queued step (a subclass may measure it). */
  protected runOne(runner: StepRunner, req: StepRequest, scope?: DispatchScope): Promise<unknown> {
    return runner.runStep(req, scope);
  }

  /** DispatchScope.outsideSlot: give the slot up while `io` runs, take one back (before the queue) after. */
  private readonly outsideSlot = async <T>(io: () => Promise<T>): Promise<T> => {
    this.running--;
    this.pump();
    try {
      return await io();
    } finally {
      await new Promise<void>((resolve) => {
        this.resuming.push(resolve);
        this.pump();
      });
    }
  };

  private pump(): void {
    while (this.running < this.concurrency && this.resuming.length) {
      this.running++;
      this.resuming.shift()!();
    }
    while (this.running < this.concurrency && this.queue.length) {
      const q = this.queue.shift()!;
      this.track(this.runOne(q.runner, q.req, { ...q.scope, outsideSlot: this.outsideSlot }), q.done, q.req.instanceId);
    }
  }

  private track(p: Promise<unknown>, done?: () => void, instanceId?: string): void {
    this.running++;
    this.inFlight++;
    p.catch((err: unknown) => logError("edda: step failed", err, { instance_id: instanceId })).finally(() => {
      this.running--;
      this.inFlight--;
      done?.();
      this.pump();
      if (this.inFlight === 0 && this.queue.length === 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      }
    });
  }
}
