/**
 * Follow-up steps as signed HTTP requests to the app's own `POST /_edda/step`
 * (Workers without a queue: SELF binding, loopback or public URL; Deno and
 * Node servers). The receiver acknowledges at once and runs the step in its
 * own background work, so no invocation waits for the chain behind it.
 *
 * Two platform limits shape it:
 * - Hops. Each request carries (in its signed body) how many follow-ups led
 *   to it. Workers refuse a chain of Workers invoking themselves past 16
 *   (error 1019); past `maxHops` (default 8) the chain is not extended: the
 *   handed lease is released and the instance waits, runnable, for the next
 *   sweep (or a queue).
 * - Subrequests. Every request takes from the invocation's budget; one is kept
 *   for a continuation request carrying every step beyond it (the receiver
 *   runs them and fans out further with its own budget). With nothing left,
 *   steps are deferred to the sweep.
 *
 * No invocation sleeps to fire a timer: short timers are the sweep's, except
 * on long-lived servers that opt in with `maxWakeSeconds`.
 */
import { sign } from "../core/signature.ts";
import { deferStep, type Dispatcher, type DispatchScope, type StepRequest, type StepRunner } from "./dispatcher.ts";

export interface HttpDispatcherOptions {
  /** The app's public base URL (EDDA_PUBLIC_URL). */
  baseUrl: string;
  secret: string;
  /** Defaults to the global fetch (a service binding's fetch on Workers). */
  fetch?: typeof fetch;
  /** Follow-ups a chain may take before it is left to the sweep (default 8, Workers refuse past 16). */
  maxHops?: number;
  /**
   * Long-lived servers only (Node): timers due within this many seconds are
   * fired by an in-process timer. Default 0: every timer is the sweep's.
   */
  maxWakeSeconds?: number;
}

/** Largest batch one continuation request carries (the route accepts 500). */
const MAX_STEPS_PER_REQUEST = 500;

export class HttpDispatcher implements Dispatcher {
  private runner: StepRunner | null = null;
  private readonly fetchFn: typeof fetch;
  private readonly url: string;
  readonly maxHops: number;
  private readonly maxWakeSeconds: number;
  private readonly overflow = new WeakMap<object, StepRequest[]>();
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();

  constructor(private readonly opts: HttpDispatcherOptions) {
    this.fetchFn = opts.fetch ?? ((input, init) => fetch(input, init));
    this.url = new URL("/_edda/step", opts.baseUrl).toString();
    this.maxHops = opts.maxHops ?? 8;
    this.maxWakeSeconds = opts.maxWakeSeconds ?? 0;
  }

  attach(runner: StepRunner): void {
    this.runner ??= runner;
  }

  dispatch(req: StepRequest, scope?: DispatchScope): void {
    this.send([req], scope);
  }

  wakeIn(delaySeconds: number, scope?: DispatchScope): void {
    const runner = scope?.runner ?? this.runner;
    if (this.maxWakeSeconds <= 0 || delaySeconds > this.maxWakeSeconds || !runner) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      runner.fireDueTimers({ ...scope, hop: 0 }).catch((err: unknown) => console.error("edda: firing due timers failed (the sweep fires them)", err));
    }, delaySeconds * 1000 + 5);
    (t as { unref?: () => void }).unref?.();
    this.timers.add(t);
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  /**
   * Send steps as follow-ups of the invocation `scope` describes: bounded by
   * its hop count and its subrequest budget (one slot kept for the
   * continuation request that carries every step beyond it).
   */
  send(steps: StepRequest[], scope?: DispatchScope): void {
    const hop = (scope?.hop ?? 0) + 1;
    if (hop > this.maxHops) {
      for (const s of steps) deferStep(s, scope, `hop ${hop} > ${this.maxHops}`);
      return;
    }
    const budget = scope?.budget;
    if (!budget || budget.remaining > 1) {
      budget?.take();
      return this.post(steps, hop, scope);
    }
    const key = budget;
    let overflow = this.overflow.get(key);
    if (!overflow) {
      if (!budget.take()) {
        for (const s of steps) deferStep(s, scope, "subrequest budget spent");
        return;
      }
      overflow = [];
      this.overflow.set(key, overflow);
      const batch = overflow;
      // Collect what this tick dispatches, then send it as one continuation.
      const p = new Promise<void>((resolve) => setTimeout(resolve, 0)).then(() => {
        const sent = batch.slice(0, MAX_STEPS_PER_REQUEST);
        for (const s of batch.slice(MAX_STEPS_PER_REQUEST)) deferStep(s, scope, "continuation full");
        this.post(sent, hop, scope);
      });
      scope?.waitUntil?.(p);
    }
    overflow.push(...steps);
  }

  private post(steps: StepRequest[], hop: number, scope?: DispatchScope): void {
    const body = JSON.stringify(steps.length === 1 ? { ...steps[0], hop } : { steps, hop });
    const p = (async () => {
      const headers = { "content-type": "application/json", ...(await sign(this.opts.secret, { method: "POST", path: new URL(this.url).pathname, body })) };
      const res = await this.fetchFn(this.url, { method: "POST", headers, body });
      // Drain the body so the connection is reusable.
      await res.arrayBuffer().catch(() => undefined);
      if (!res.ok) throw new Error(`follow-up step → HTTP ${res.status}`);
    })().catch((err: unknown) => console.error("edda: follow-up dispatch failed (the sweeper will resume it)", err));
    scope?.waitUntil?.(p);
  }
}
