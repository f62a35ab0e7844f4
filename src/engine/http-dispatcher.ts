/**
 * Follow-up steps as signed HTTP requests to the app's own `POST /_edda/step`
 * (Workers without a queue: SELF binding, loopback or public URL; Deno and
 * Node servers). The receiver acknowledges at once and runs the step in its
 * own background work, so no invocation waits for the chain behind it.
 *
 * Steps dispatched in the same turn of the event loop by one invocation (a
 * group commit concludes many at once) travel together: one request with
 * every step, which the receiver runs side by side, so their conclusions
 * meet in its group commit too.
 *
 * Two platform limits shape it:
 * - Hops, where the platform bounds them. Each request carries (in its signed
 *   body) how many follow-ups led to it. Workers refuse a chain of Workers
 *   invoking themselves past 16 (error 1019, "loop limit",
 *   developers.cloudflare.com/workers/observability/errors/), so the Workers
 *   adapter sets `maxHops` (8 by default); Node and Deno servers have no such
 *   limit and set none. At the bound the chain goes on through `continueWith`
 *   (the platform's queue: a consumer invocation is top level, hop 0) where
 *   there is one; else the handed lease is released and the instance waits,
 *   runnable, for the next sweep.
 * - Subrequests. Every request takes one from the invocation's budget; with
 *   nothing left, steps are deferred to the sweep.
 *
 * No invocation sleeps to fire a timer: short timers are the sweep's, except
 * on long-lived servers that opt in with `maxWakeSeconds`.
 */
import { nodeBuiltin } from "../core/node-builtin.ts";
import { sign } from "../core/signature.ts";
import { deferStep, type Dispatcher, type DispatchScope, type StepRequest, type StepRunner } from "./dispatcher.ts";
import { nextTurn } from "./group-commit.ts";

export interface HttpDispatcherOptions {
  /** The app's public base URL (EDDA_PUBLIC_URL). */
  baseUrl: string;
  secret: string;
  /**
   * How a follow-up travels (a service binding's fetch on Workers). Default: on Node, node:http with a
   * keep-alive agent (a fraction of the global fetch's CPU per request); elsewhere the global fetch.
   */
  fetch?: typeof fetch;
  /**
   * Follow-ups a chain may take before it goes on through `continueWith` (or
   * is left to the sweep). Default: no bound — set it where the platform
   * imposes one (the Workers adapter: 8, Workers refuse past 16).
   */
  maxHops?: number;
  /** Where a chain at `maxHops` goes on (a queue dispatcher: a fresh top-level invocation); default: the sweep. */
  continueWith?: Dispatcher;
  /**
   * Long-lived servers only (Node): timers due within this many seconds are
   * fired by an in-process timer. Default 0: every timer is the sweep's.
   */
  maxWakeSeconds?: number;
}

/** Largest batch one request carries (the route accepts 500). */
const MAX_STEPS_PER_REQUEST = 500;

/** Sends one signed follow-up; resolves to the HTTP status once the response is read. */
type Post = (body: string, headers: Record<string, string>) => Promise<number>;

type NodeHttp = {
  Agent: new (opts: { keepAlive: boolean }) => { destroy(): void };
  request(url: URL, opts: object, onResponse: (res: NodeResponse) => void): NodeRequest;
};
type NodeResponse = { statusCode?: number; resume(): void; on(ev: "end", f: () => void): void; on(ev: "error", f: (err: Error) => void): void };
type NodeRequest = { reusedSocket: boolean; on(ev: "error", f: (err: Error & { code?: string }) => void): void; end(body: string): void };

/**
 * node:http (or https) with a keep-alive agent: the follow-ups to one receiver reuse their connections,
 * and a request costs no WHATWG Request, Response, stream or AbortSignal. A reused connection the
 * receiver closed while idle (its keep-alive timeout) fails with ECONNRESET before anything was read:
 * sent again once on a fresh one — harmless even had it arrived, a follow-up is single-use.
 */
function nodePost(url: URL): { post: Post; close(): void } | null {
  const http = nodeBuiltin<NodeHttp>(url.protocol === "https:" ? "node:https" : "node:http");
  if (!http || (url.protocol !== "http:" && url.protocol !== "https:")) return null;
  const agent = new http.Agent({ keepAlive: true });
  const once = (body: string, headers: Record<string, string>, retry: boolean): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = http.request(url, { method: "POST", agent, headers }, (res) => {
        res.on("error", reject);
        res.on("end", () => resolve(res.statusCode ?? 0));
        // Drain the body so the connection is reusable.
        res.resume();
      });
      req.on("error", (err) => {
        if (retry && req.reusedSocket && err.code === "ECONNRESET") resolve(once(body, headers, false));
        else reject(err);
      });
      req.end(body); // one whole body: Node sets its content-length
    });
  return { post: (body, headers) => once(body, headers, true), close: () => agent.destroy() };
}

const withLease = (s: StepRequest, lease: { workerId: string; token: number } | null): StepRequest | null => (lease ? { ...s, lease } : null);

export class HttpDispatcher implements Dispatcher {
  private runner: StepRunner | null = null;
  private readonly postFn: Post;
  private readonly closeTransport: () => void;
  private readonly url: string;
  private readonly path: string;
  readonly maxHops: number;
  private readonly maxWakeSeconds: number;
  /** Steps dispatched this turn, per invocation (its budget), sent together at the turn's end. */
  private readonly pending = new WeakMap<object, StepRequest[]>();
  /** Key for dispatches outside any invocation scope. */
  private readonly unscoped = {};
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();

  constructor(private readonly opts: HttpDispatcherOptions) {
    const url = new URL("/_edda/step", opts.baseUrl);
    this.url = url.toString();
    this.path = url.pathname;
    const node = opts.fetch ? null : nodePost(url);
    const fetchFn = opts.fetch ?? ((input, init) => fetch(input, init));
    this.postFn =
      node?.post ??
      (async (body, headers) => {
        const res = await fetchFn(this.url, { method: "POST", headers, body });
        // Drain the body so the connection is reusable.
        await res.arrayBuffer().catch(() => undefined);
        return res.status;
      });
    this.closeTransport = node?.close ?? (() => undefined);
    this.maxHops = opts.maxHops ?? Infinity;
    this.maxWakeSeconds = opts.maxWakeSeconds ?? 0;
  }

  attach(runner: StepRunner): void {
    this.runner ??= runner;
    this.opts.continueWith?.attach(runner);
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
    this.closeTransport();
  }

  /**
   * Send steps as follow-ups of the invocation `scope` describes. What it
   * dispatches in one turn goes as one request (up to the route's 500 steps
   * each), bounded by its hop count and its subrequest budget.
   */
  send(steps: StepRequest[], scope?: DispatchScope): void {
    const key = this.keyOf(scope);
    const batch = this.pending.get(key);
    if (batch) {
      batch.push(...steps);
      return;
    }
    const all = [...steps];
    this.pending.set(key, all);
    // After this turn's I/O callbacks: the steps a group commit concluded together are all dispatched by then.
    const p = new Promise<void>((resolve) => nextTurn(resolve)).then(() => {
      this.pending.delete(key);
      this.flush(all, scope);
    });
    scope?.waitUntil?.(p);
  }

  /**
   * Whose steps may travel together. Invocations of a long-lived server (Node, Deno) share nothing that
   * bounds them — no subrequest budget, no hop bound, no `waitUntil` — so every step this process
   * dispatches in a turn goes in one request, whichever request concluded it; elsewhere, one
   * invocation's own (its budget, its hops, its I/O).
   */
  private keyOf(scope: DispatchScope | undefined): object {
    if (!scope) return this.unscoped;
    const bounded = scope.waitUntil !== undefined || Number.isFinite(this.maxHops) || (scope.budget !== undefined && Number.isFinite(scope.budget.remaining));
    return bounded ? (scope.budget ?? scope) : this.unscoped;
  }

  private flush(steps: StepRequest[], scope: DispatchScope | undefined): void {
    const hop = (scope?.hop ?? 0) + 1;
    if (hop > this.maxHops) {
      const next = this.opts.continueWith;
      for (const s of steps) {
        if (next) next.dispatch(s, scope);
        else this.giveBack([s], scope, `hop ${hop} > ${this.maxHops}`);
      }
      return;
    }
    const budget = scope?.budget;
    for (let i = 0; i < steps.length; i += MAX_STEPS_PER_REQUEST) {
      if (budget && !budget.take()) {
        this.giveBack(steps.slice(i), scope, "subrequest budget spent");
        return;
      }
      this.post(steps.slice(i, i + MAX_STEPS_PER_REQUEST), hop, scope);
    }
  }

  private post(steps: StepRequest[], hop: number, scope?: DispatchScope): void {
    const runner = scope?.runner ?? this.runner;
    let leased = steps;
    const p = (async () => {
      // Every request names the lease it continues, so it is single-use (a captured one replayed runs nothing, step.ts):
      // a step without one (a wake-up, the sweep) takes its hand-off lease here, and one with nothing to run is not sent.
      if (runner?.handOff) leased = (await Promise.all(steps.map(async (s) => (s.lease ? s : withLease(s, await runner.handOff!(s.instanceId)))))).filter((s) => s !== null);
      if (!leased.length) return;
      const body = JSON.stringify(leased.length === 1 ? { ...leased[0], hop } : { steps: leased, hop });
      const headers = { "content-type": "application/json", ...(await sign(this.opts.secret, { method: "POST", path: this.path, body })) };
      const status = await this.postFn(body, headers);
      if (status < 200 || status > 299) throw new Error(`follow-up step → HTTP ${status}`);
    })().catch((err: unknown) => {
      console.error("edda: follow-up dispatch failed (the sweeper will resume it)", err);
      // A handed lease the failed request carried is given back (a step's hand-off, or the one taken just above):
      // the sweep's idle rule (2 s) resumes the instance then, not the lease's expiry (30 s). A request that did
      // reach a step which then failed released or handed that lease on already: the release matches nothing.
      this.giveBack(leased, scope, "follow-up dispatch failed");
    });
    scope?.waitUntil?.(p);
  }

  /** Steps not sent go back to the database: their handed lease released (dispatcher.ts deferStep). */
  private giveBack(steps: StepRequest[], scope: DispatchScope | undefined, why: string): void {
    const runner = scope?.runner ?? this.runner;
    for (const s of steps) deferStep(s, runner ? { ...scope, runner } : scope, why);
  }
}
