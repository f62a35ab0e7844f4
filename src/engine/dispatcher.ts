/**
 * Dispatchers decide how a follow-up step is triggered after a commit. The
 * database is the source of truth: a lost dispatch only delays work until the
 * sweeper finds the instance (runnable, or its handed-off lease expired).
 *
 * - `LocalDispatcher`: an in-process queue (Node, embedded PGlite, tests).
 * - `HttpDispatcher` (http-dispatcher.ts): a signed request to the app's own
 *   `POST /_edda/step`, so no worker is pinned (Workers, Deno Deploy).
 */

export interface StepRequest {
  instanceId: string;
  /** A lease handed over by the concluding step: the follow-up starts with a read. */
  lease?: { workerId: string; token: number };
}

/** Per-request scope: Workers' `ctx.waitUntil` keeps post-response work alive. */
export interface DispatchScope {
  waitUntil?(promise: Promise<unknown>): void;
}

export interface StepRunner {
  runStep(req: StepRequest, scope?: DispatchScope): Promise<unknown>;
  /** Fire due timers and dispatch what they woke. */
  fireDueTimers(scope?: DispatchScope): Promise<number>;
}

export interface Dispatcher {
  attach(runner: StepRunner): void;
  /** Trigger a step soon. Never throws. */
  dispatch(req: StepRequest, scope?: DispatchScope): void;
  /** Hint that a timer becomes due in `delaySeconds` (short sleeps, retry backoff). */
  wakeIn?(delaySeconds: number, scope?: DispatchScope): void;
  /** Stop accepting work and wait for in-flight steps. */
  close?(): Promise<void>;
}

export interface LocalDispatcherOptions {
  /** Steps run at once (default 8). */
  concurrency?: number;
  /** Timers further out than this are left to the sweeper (default 300 s). */
  maxWakeSeconds?: number;
}

export class LocalDispatcher implements Dispatcher {
  private runner: StepRunner | null = null;
  private readonly queue: StepRequest[] = [];
  private running = 0;
  private closed = false;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly wakeSlots = new Set<number>();
  private idleWaiters: (() => void)[] = [];
  private readonly concurrency: number;
  private readonly maxWakeSeconds: number;

  constructor(opts: LocalDispatcherOptions = {}) {
    this.concurrency = opts.concurrency ?? 8;
    this.maxWakeSeconds = opts.maxWakeSeconds ?? 300;
  }

  attach(runner: StepRunner): void {
    this.runner = runner;
  }

  dispatch(req: StepRequest): void {
    if (this.closed) return;
    this.queue.push(req);
    this.pump();
  }

  wakeIn(delaySeconds: number): void {
    if (this.closed || delaySeconds > this.maxWakeSeconds) return;
    // One wake-up per 20 ms slot: a burst of sleeps due together needs one firing pass, not one each.
    const slot = Math.ceil((Date.now() + Math.max(0, delaySeconds * 1000)) / 20) * 20;
    if (this.wakeSlots.has(slot)) return;
    this.wakeSlots.add(slot);
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.wakeSlots.delete(slot);
      if (!this.closed && this.runner) this.track(this.runner.fireDueTimers());
    }, slot - Date.now() + 5);
    (t as { unref?: () => void }).unref?.();
    this.timers.add(t);
  }

  /** Resolves when no step is queued or running (tests, graceful shutdown). */
  idle(): Promise<void> {
    if (this.running === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.wakeSlots.clear();
    this.queue.length = 0;
    await this.idle();
  }

  private pump(): void {
    while (this.runner && this.running < this.concurrency && this.queue.length) {
      const req = this.queue.shift()!;
      this.track(this.runner.runStep(req));
    }
  }

  private track(p: Promise<unknown>): void {
    this.running++;
    p.catch((err: unknown) => console.error("edda: step failed", err)).finally(() => {
      this.running--;
      this.pump();
      if (this.running === 0 && this.queue.length === 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      }
    });
  }
}
