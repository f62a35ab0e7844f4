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
 */
import { TRACEPARENT_PATTERN } from "./tracing.ts";
import { deferStep, type Dispatcher, type DispatchScope, type StepRequest, type StepRunner } from "./dispatcher.ts";

/** A message body on the follow-up queue. */
export type FollowUp = { kind: "step"; instanceId: string; lease?: { workerId: string; token: number }; traceparent?: string } | { kind: "timers"; due: number };

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
   * plan's 50); held, a batch of 100 costs one `sendBatch`.
   */
  hold(scope: DispatchScope): () => Promise<void> {
    const key = scope.budget ?? this.unscoped;
    this.held.add(key);
    return () => {
      this.held.delete(key);
      const batch = this.pending.get(key);
      if (!batch) return Promise.resolve();
      this.pending.delete(key);
      return this.flush(batch, scope);
    };
  }

  private enqueue(message: OutgoingMessage, scope: DispatchScope | undefined): void {
    const key = scope?.budget ?? this.unscoped;
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
