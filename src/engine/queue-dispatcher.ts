/**
 * Follow-ups as messages on a platform queue (Cloudflare Queues on Workers,
 * Deno KV queues on Deno). A consumer invocation — top level, never nested in
 * the one that dispatched — runs the step, so a long pipeline is a series of
 * independent invocations: no loop limit, no CPU shared with a parent, and
 * no invocation open for the chain behind it.
 *
 * - Steps dispatched in one tick of one invocation go out together, in
 *   batches of the queue's `maxBatch` (Queues: 100 per `sendBatch`); a
 *   consumer batch holds its follow-ups until its last message is done
 *   (`hold`), so the whole batch's go out together.
 * - Short timers and retry backoffs become a delayed "fire due timers"
 *   message (up to the queue's `maxDelaySeconds`); longer ones stay with the
 *   cron sweep. No invocation sleeps.
 * - Delivery is at least once and that is harmless: a step request carries
 *   its fenced lease (a stale one is skipped), and firing timers is
 *   idempotent.
 * - Each send takes one subrequest from the invocation's budget; what finds
 *   it spent (or a send that fails) is handed back to the database for the
 *   next sweep.
 * - A consumer batch (`consumeBatch`) runs its messages side by side and
 *   chains: a step follow-up of one of its own steps runs in the same
 *   invocation (on its database client, warm) instead of leaving as a new
 *   message, while the invocation's CPU estimate and wall time allow
 *   (`ChainLimits`); what is left over goes out in the batch's `sendBatch`.
 */
import { TRACEPARENT_PATTERN } from "./tracing.ts";
import { deferStep, type Dispatcher, type DispatchScope, type StepRequest, type StepRunner } from "./dispatcher.ts";

/** A step message body. */
export type StepFollowUp = { kind: "step"; instanceId: string; lease?: { workerId: string; token: number }; traceparent?: string };
/** A message body on the follow-up queue. */
export type FollowUp = StepFollowUp | { kind: "timers"; due: number };

export interface OutgoingMessage {
  body: FollowUp;
  delaySeconds?: number;
}

/** The platform queue, as the dispatcher needs it. */
export interface FollowUpQueue {
  /** Send up to `maxBatch` messages in one platform call. */
  send(messages: OutgoingMessage[]): Promise<void>;
  readonly maxBatch: number;
  readonly maxDelaySeconds: number;
}

export class QueueDispatcher implements Dispatcher {
  private runner: StepRunner | null = null;
  private readonly pending = new WeakMap<object, OutgoingMessage[]>();
  private readonly timerSlots = new WeakMap<object, Set<number>>();
  private readonly held = new WeakSet<object>();
  /** Held scopes that run their step follow-ups themselves (a consumer batch's chain): true when it took one. */
  private readonly chains = new WeakMap<object, (body: StepFollowUp) => boolean>();
  /** Key for dispatches outside any invocation scope. */
  private readonly unscoped = {};

  constructor(private readonly queue: FollowUpQueue) {}

  attach(runner: StepRunner): void {
    this.runner ??= runner;
  }

  dispatch(req: StepRequest, scope?: DispatchScope): void {
    this.enqueue({ body: { kind: "step", instanceId: req.instanceId, ...(req.lease ? { lease: req.lease } : {}), ...(req.traceparent ? { traceparent: req.traceparent } : {}) } }, scope);
  }

  wakeIn(delaySeconds: number, scope?: DispatchScope): void {
    // Queues count delays in whole seconds; the consumer re-delays a message that arrives early.
    const delay = Math.max(0, Math.ceil(delaySeconds));
    if (delay > this.queue.maxDelaySeconds) return; // the cron sweep fires it
    const key = scope?.budget ?? this.unscoped;
    let slots = this.timerSlots.get(key);
    if (!slots) this.timerSlots.set(key, (slots = new Set()));
    if (slots.has(delay)) return; // one wake-up per second of this invocation is enough
    slots.add(delay);
    this.enqueue({ body: { kind: "timers", due: Date.now() + Math.max(0, delaySeconds) * 1000 }, delaySeconds: delay }, scope);
  }

  /**
   * Keep what `scope` dispatches until the returned release is called, then
   * send it all in `maxBatch` chunks. A consumer batch holds its follow-ups
   * this way: its messages finish in different ticks, and one send each
   * would spend a subrequest per message (100 per batch, over the Free
   * plan's 50); held, a batch of 100 costs one `sendBatch`. With `chain`,
   * an undelayed step follow-up is offered to it first, and only what it
   * declines is kept for the send.
   */
  hold(scope: DispatchScope, chain?: (body: StepFollowUp) => boolean): () => Promise<void> {
    const key = scope.budget ?? this.unscoped;
    this.held.add(key);
    if (chain) this.chains.set(key, chain);
    return () => {
      this.held.delete(key);
      this.chains.delete(key);
      const batch = this.pending.get(key);
      if (!batch) return Promise.resolve();
      this.pending.delete(key);
      return this.flush(batch, scope);
    };
  }

  /** Send `body` as a message `delaySeconds` from now, with what `scope` sends (a chained step that failed goes back to the queue). */
  sendLater(body: StepFollowUp, delaySeconds: number, scope: DispatchScope): void {
    this.enqueue({ body, delaySeconds: Math.max(1, Math.ceil(delaySeconds)) }, scope);
  }

  private enqueue(message: OutgoingMessage, scope: DispatchScope | undefined): void {
    const key = scope?.budget ?? this.unscoped;
    if (message.body.kind === "step" && !message.delaySeconds && this.chains.get(key)?.(message.body)) return;
    let batch = this.pending.get(key);
    if (batch) {
      batch.push(message);
      return;
    }
    batch = [message];
    this.pending.set(key, batch);
    if (this.held.has(key)) return; // sent on release
    const all = batch;
    // Everything this invocation dispatches in the same tick travels in as few sends as possible.
    const p = Promise.resolve().then(() => {
      this.pending.delete(key);
      return this.flush(all, scope);
    });
    scope?.waitUntil?.(p);
  }

  private async flush(messages: OutgoingMessage[], scope: DispatchScope | undefined): Promise<void> {
    const sends: Promise<void>[] = [];
    for (let i = 0; i < messages.length; i += this.queue.maxBatch) {
      const chunk = messages.slice(i, i + this.queue.maxBatch);
      if (scope?.budget && !scope.budget.take()) {
        this.giveBack(chunk, scope, "subrequest budget spent");
        continue;
      }
      sends.push(
        this.queue.send(chunk).catch((err: unknown) => {
          console.error("edda: queue send failed (the sweeper will resume)", err);
          this.giveBack(chunk, scope, "queue send failed");
        }),
      );
    }
    await Promise.all(sends);
  }

  /** Steps not sent go back to the database (their handed lease released); timers stay with the sweep. */
  private giveBack(messages: OutgoingMessage[], scope: DispatchScope | undefined, why: string): void {
    const runner = scope?.runner ?? this.runner;
    for (const m of messages) {
      if (m.body.kind !== "step") continue;
      const { instanceId, lease } = m.body;
      deferStep({ instanceId, ...(lease ? { lease } : {}) }, runner ? { ...scope, runner } : scope, why);
    }
  }
}

export type FollowUpOutcome = { ack: true } | { ack: false; retryInSeconds: number };

/** A message of a consumer batch (Cloudflare's `Message`). */
export interface BatchMessage {
  readonly body: unknown;
  readonly attempts: number;
  ack(): void;
  retry(options?: { delaySeconds?: number }): void;
}

/**
 * How far a consumer invocation chains (`consumeBatch`). An isolate cannot
 * read its own CPU time, so the CPU is an estimate: steps taken on
 * (the batch's messages and the chained steps) × `stepCpuMs`. A chained step
 * starts only while that estimate, one step more, stays within `cpuMs` and
 * the invocation is younger than `wallMs`. `cpuMs` 0: no chain (one message
 * per step, as without it).
 */
export interface ChainLimits {
  cpuMs: number;
  stepCpuMs: number;
  wallMs: number;
  /** Clock (ms), for tests. */
  now?: () => number;
}

export interface BatchReport {
  /** Step follow-ups this invocation ran itself instead of sending. */
  chained: number;
  /** Work items run: the messages and the chained steps. */
  steps: number;
}

/**
 * Run a consumer batch as one invocation: its messages side by side (at
 * most `concurrency` at once; their reads and conclusions meet in the group
 * load and group commit of `runner`), each acked once its work is done or
 * retried with backoff if it threw. With a QueueDispatcher the batch holds
 * its follow-ups (one `sendBatch` per 100 at the end) and chains: a step
 * follow-up its own steps dispatch runs here, in this invocation, while
 * `chain` allows, else it is sent. A chained step carries its handed lease
 * like the message would (the fence is the same), so running it here
 * instead of in the next invocation changes where it runs, not what: a
 * chained step that throws goes out as a delayed message, as the message
 * would have been retried.
 */
export async function consumeBatch(
  runner: StepRunner,
  dispatcher: Dispatcher,
  scope: DispatchScope,
  messages: readonly BatchMessage[],
  opts: { concurrency: number; chain?: ChainLimits },
): Promise<BatchReport> {
  type Work = { body: unknown; msg?: BatchMessage };
  const queue: Work[] = messages.map((msg) => ({ body: msg.body, msg }));
  const report: BatchReport = { chained: 0, steps: 0 };
  const queueDispatcher = dispatcher instanceof QueueDispatcher ? dispatcher : null;
  const limits = opts.chain;
  const now = limits?.now ?? Date.now;
  const began = now();
  let active = 0;
  let closed = false;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));

  const spawn = () => {
    while (!closed && active < opts.concurrency && queue.length) {
      active++;
      void work();
    }
  };
  const chain = (body: StepFollowUp): boolean => {
    if (closed || !limits) return false;
    const taken = messages.length + report.chained;
    if ((taken + 1) * limits.stepCpuMs > limits.cpuMs || now() - began >= limits.wallMs) return false;
    report.chained++;
    queue.push({ body });
    // Started after the dispatching step's turn: dispatch is called inside its conclusion's after-commit.
    queueMicrotask(spawn);
    return true;
  };
  const work = async () => {
    for (let w = queue.shift(); w; w = queue.shift()) {
      report.steps++;
      const msg = w.msg;
      try {
        const outcome = await runFollowUp(runner, w.body, scope);
        if (outcome.ack) msg?.ack();
        else msg?.retry({ delaySeconds: outcome.retryInSeconds });
      } catch (err) {
        // A lease that is still held, a database hiccup: redelivery is harmless (steps are fenced).
        console.error("edda: follow-up failed, retrying", err);
        const delaySeconds = Math.min(60, 2 ** Math.min(msg?.attempts ?? 1, 6));
        if (msg) msg.retry({ delaySeconds });
        else if (queueDispatcher) queueDispatcher.sendLater(w.body as StepFollowUp, delaySeconds, scope);
      }
    }
    active--;
    if (active === 0 && queue.length === 0 && !closed) {
      closed = true;
      finish();
    }
  };

  // The batch's follow-ups leave together when its last step is done: one sendBatch per 100, not a send per message.
  const release = queueDispatcher ? queueDispatcher.hold(scope, limits && limits.cpuMs > 0 ? chain : undefined) : null;
  try {
    spawn();
    if (active > 0) await finished;
  } finally {
    closed = true;
    await release?.();
  }
  return report;
}

/**
 * Run one follow-up message in a consumer invocation. Malformed bodies are
 * acknowledged (logged) so they never loop; a timers message that arrived
 * before its timer was due is delayed again.
 */
export async function runFollowUp(runner: StepRunner, body: unknown, scope: DispatchScope): Promise<FollowUpOutcome> {
  const msg = parseFollowUp(body);
  if (!msg) {
    console.error("edda: dropping a malformed follow-up message", JSON.stringify(body)?.slice(0, 200));
    return { ack: true };
  }
  if (msg.kind === "step") {
    await runner.runStep({ instanceId: msg.instanceId, ...(msg.lease ? { lease: msg.lease } : {}), ...(msg.traceparent ? { traceparent: msg.traceparent } : {}) }, scope);
    return { ack: true };
  }
  const fired = await runner.fireDueTimers(scope);
  const early = msg.due - Date.now();
  if (fired === 0 && early > 0) return { ack: false, retryInSeconds: Math.ceil(early / 1000) };
  return { ack: true };
}

function parseFollowUp(body: unknown): FollowUp | null {
  if (typeof body !== "object" || body === null) return null;
  const b = body as Record<string, unknown>;
  if (b.kind === "timers") return typeof b.due === "number" && Number.isFinite(b.due) ? { kind: "timers", due: b.due } : null;
  if (b.kind !== "step" || typeof b.instanceId !== "string" || b.instanceId.length === 0 || b.instanceId.length > 255) return null;
  const trace = typeof b.traceparent === "string" && TRACEPARENT_PATTERN.test(b.traceparent) ? { traceparent: b.traceparent } : {};
  if (b.lease === undefined) return { kind: "step", instanceId: b.instanceId, ...trace };
  const l = b.lease as Record<string, unknown> | null;
  if (!l || typeof l.workerId !== "string" || !Number.isSafeInteger(l.token) || (l.token as number) < 0) return null;
  return { kind: "step", instanceId: b.instanceId, lease: { workerId: l.workerId, token: l.token as number }, ...trace };
}
