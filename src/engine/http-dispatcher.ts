/**
 * Follow-up steps as signed HTTP requests to the app's own `POST /_edda/step`.
 * Each request runs one step in whichever stateless instance receives it.
 * On Workers the fetch runs inside `ctx.waitUntil`. Fan-out per request is
 * bounded (subrequest limits): beyond `maxFetchesPerScope`, the remaining
 * steps travel together in one request that continues the fan-out.
 */
import { sign } from "../core/signature.ts";
import type { Dispatcher, DispatchScope, StepRequest, StepRunner } from "./dispatcher.ts";

export interface HttpDispatcherOptions {
  /** The app's public base URL (EDDA_PUBLIC_URL). */
  baseUrl: string;
  secret: string;
  /** Defaults to the global fetch (a service binding's fetch on Workers). */
  fetch?: typeof fetch;
  maxFetchesPerScope?: number;
  /**
   * Timers due within this many seconds (short sleeps, retry backoff) are
   * waited for inside the request that set them (default 20; 0 leaves every
   * timer to the sweeper). On Workers the wait holds `ctx.waitUntil` open.
   */
  maxWakeSeconds?: number;
}

export class HttpDispatcher implements Dispatcher {
  private runner: StepRunner | null = null;
  private readonly fetchFn: typeof fetch;
  private readonly url: string;
  private readonly max: number;
  private readonly maxWakeSeconds: number;
  private readonly counts = new WeakMap<DispatchScope, number>();
  private readonly overflow = new WeakMap<DispatchScope, StepRequest[]>();

  constructor(private readonly opts: HttpDispatcherOptions) {
    this.fetchFn = opts.fetch ?? ((input, init) => fetch(input, init));
    this.url = new URL("/_edda/step", opts.baseUrl).toString();
    this.max = opts.maxFetchesPerScope ?? 40;
    this.maxWakeSeconds = opts.maxWakeSeconds ?? 20;
  }

  attach(runner: StepRunner): void {
    this.runner = runner;
  }

  dispatch(req: StepRequest, scope?: DispatchScope): void {
    this.send([req], scope);
  }

  wakeIn(delaySeconds: number, scope?: DispatchScope): void {
    // Only short waits are worth holding a request open for; the cron catches the rest.
    if (this.maxWakeSeconds <= 0 || delaySeconds > this.maxWakeSeconds || !this.runner) return;
    const runner = this.runner;
    const p = new Promise<void>((resolve) => setTimeout(resolve, delaySeconds * 1000 + 5)).then(() => runner.fireDueTimers(scope));
    this.keep(p, scope);
  }

  /**
   * Send steps. Within a request scope at most `maxFetchesPerScope` requests
   * go out; one slot is kept for a continuation request that carries every
   * step beyond the budget (the receiver runs them and fans out further).
   * Outside a request (Node servers) there is no budget.
   */
  send(steps: StepRequest[], scope?: DispatchScope): void {
    if (!scope) return this.post(steps);
    const used = this.counts.get(scope) ?? 0;
    if (used < this.max - 1) {
      this.counts.set(scope, used + 1);
      return this.post(steps, scope);
    }
    let overflow = this.overflow.get(scope);
    if (!overflow) {
      overflow = [];
      this.overflow.set(scope, overflow);
      const batch = overflow;
      this.keep(
        new Promise<void>((resolve) => setTimeout(resolve, 0)).then(() => {
          this.overflow.delete(scope);
          for (let i = 0; i < batch.length; i += 500) this.post(batch.slice(i, i + 500), scope);
        }),
        scope,
      );
    }
    overflow.push(...steps);
  }

  private post(steps: StepRequest[], scope?: DispatchScope): void {
    const body = JSON.stringify(steps.length === 1 ? steps[0] : { steps });
    const p = (async () => {
      const headers = { "content-type": "application/json", ...(await sign(this.opts.secret, body)) };
      const res = await this.fetchFn(this.url, { method: "POST", headers, body });
      // Drain the body so the connection is reusable.
      await res.arrayBuffer().catch(() => undefined);
      if (!res.ok) throw new Error(`follow-up step → HTTP ${res.status}`);
    })().catch((err: unknown) => console.error("edda: follow-up dispatch failed (the sweeper will resume it)", err));
    this.keep(p, scope);
  }

  private keep(p: Promise<unknown>, scope?: DispatchScope) {
    if (scope?.waitUntil) scope.waitUntil(p);
  }
}
