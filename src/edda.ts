/**
 * `createEdda`: the one object an application builds. It wires storage, the
 * engine, a dispatcher and the Hono app, and doubles as the client
 * (`start`, `getInstance`, `findInstances`, `cancel`, `sweep`).
 *
 * The database is either one long-lived `Database` (Node, embedded PGlite) or
 * a factory called per request (Workers: a client must not outlive the
 * request that opened it), closed once the request's background work is done.
 */
import { deploymentOf } from "./engine/deployment.ts";
import { ConfigurationError } from "./core/errors.ts";
import { encryptionCodec, type PayloadCodec } from "./core/payload-codec.ts";
import type { LargeValueStore } from "./storage/payload-refs.ts";
import { ActivityRegistry } from "./core/registry.ts";
import type { Context } from "hono";
import type { Hono } from "hono";
import type { Workflow } from "./core/definitions.ts";
import { webhookSecretVariable, type Webhook } from "./core/webhooks.ts";
import type { RetryPolicy } from "./core/retry.ts";
import type { ErrorClass } from "./core/serialization.ts";
import { checkScheduledInputs } from "./engine/schedules.ts";
import { Engine, type InstanceDetail, type InstanceView, type RetentionOptions, type StartOptions, type WhyView } from "./engine/engine.ts";
import { LocalDispatcher, SubrequestBudget, type Dispatcher, type DispatchScope, type LocalDispatcherOptions } from "./engine/dispatcher.ts";
import { HttpDispatcher } from "./engine/http-dispatcher.ts";
import type { PublishOptions } from "./engine/messaging.ts";
import type { OutboxOptions } from "./engine/outbox.ts";
import type { EngineHooks } from "./engine/hooks.ts";
import type { SweepOptions, SweepReport } from "./engine/sweeper.ts";
import type { TracingApi } from "./engine/tracing.ts";
import type { MetricsApi } from "./engine/metrics.ts";
import type { GroupCommitOptions } from "./engine/group-commit.ts";
import type { Database } from "./storage/database.ts";
import { createStorage } from "./storage/pg-storage.ts";
import type { InstanceStatus, ListInstancesQuery } from "./storage/types.ts";
import { createApp } from "./http/app.ts";
import { surfaceParts, type ApiSurface } from "./http/routes.ts";

export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
}

export type DispatcherOption =
  | "local"
  | { local: LocalDispatcherOptions }
  | { http: { baseUrl: string; fetch?: typeof fetch; maxHops?: number; maxWakeSeconds?: number; continueWith?: Dispatcher } }
  | Dispatcher;

export interface EddaOptions {
  workflows: Workflow[];
  database: Database | (() => Database | Promise<Database>);
  /** HMAC secret for internal routes and follow-ups (EDDA_SECRET); per-wait webhook URLs (`createWebhook`) are derived from it too. */
  secret?: string;
  /** The app's public URL (EDDA_PUBLIC_URL): per-wait webhook URLs start with it (without it they are paths). */
  publicUrl?: string;
  /**
   * Encryption at rest (EDDA_ENCRYPTION_KEY, or EDDA_ENCRYPTION_KEYS newest first): base64 of 32 bytes
   * each. Every payload is AES-256-GCM before it reaches the database; values written with an older
   * key are read with it. See docs/payloads.md.
   */
  encryptionKeys?: string | readonly string[];
  /** Your own payload codec (a KMS) instead of `encryptionKeys`: Edda stores what `encode` returns. */
  payloadCodec?: PayloadCodec;
  /** Inputs, outputs and history records over `thresholdBytes` (default 256 KiB) are stored once, by reference: in `workflow_payloads`, or `store` (`r2Values(bucket)`); one instance holds at most `maxInstanceBytes` (default `MAX_INSTANCE_BYTES`, 256 MiB). */
  largeValues?: { thresholdBytes?: number; store?: LargeValueStore; maxInstanceBytes?: number };
  /** Bearer token(s) for the public API (EDDA_API_TOKEN). */
  apiToken?: string | string[];
  /** Bearer token(s) CloudEvents ingestion accepts besides the API token (EDDA_EVENTS_TOKEN). */
  eventsToken?: string | string[];
  /** Let the events token target instances with the `eddainstanceid` extension (EDDA_EVENTS_TOKEN_TARGETING=1; default false). */
  eventsTokenTargeting?: boolean;
  serviceName?: string;
  /** This deployment's id (`EDDA_DEPLOYMENT`), recorded on each instance it starts; default: the platform's version id, else the code's hash. */
  deployment?: string;
  /** How often sweeps run against this database (s): `why` and `/readyz` call a sweep overdue at five times it. The adapters set it; `EDDA_SWEEP_EXPECTED_SECONDS` overrides. */
  sweepIntervalSeconds?: number | null;
  /**
   * The CPU time one invocation may spend on this platform (ms): `why` and the viewer warn when an instance's
   * history nears the size a cold step can replay within it. The Workers adapter sets the Free plan's 10 ms;
   * `EDDA_CPU_BUDGET_MS` overrides (30000 on a paid plan, its default). Null (Node, Deno): no warning.
   */
  cpuBudgetMs?: number | null;
  /** Where outbox events are POSTed as CloudEvents (EDDA_BROKER_URL); unset → rows stay pending. */
  brokerUrl?: string;
  /** Outbox relay tuning (retries, backoff, max age, fetch). */
  outbox?: OutboxOptions;
  /**
   * How follow-up steps are triggered: `"local"` (in-process, the default; `{ local: { concurrency } }`
   * sets how many steps run at once, default 8 — a step waiting on a non-transactional activity holds
   * none), `{ http: … }` (signed fetches to the app itself), or a Dispatcher.
   */
  dispatcher?: DispatcherOption;
  retryPolicy?: RetryPolicy;
  hooks?: EngineHooks;
  /**
   * OpenTelemetry: pass the `@opentelemetry/api` module (an optional peer
   * dependency) to get a trace per run, with spans per step, activity
   * attempt, wait and compensation. Without an SDK registered it costs ~nothing.
   */
  tracing?: TracingApi;
  /**
   * OpenTelemetry metrics: pass the `@opentelemetry/api` module (or
   * `{ metrics: meterProvider }`) for step, start, failure, quarantine,
   * sweep, queue, timer and outbox instruments (docs/operating.md, "Metrics"). Without an
   * SDK registered it costs ~nothing.
   */
  metrics?: MetricsApi;
  /** Prometheus text for GET /metrics (the Node adapter sets it with EDDA_METRICS=prometheus); unset → 404. */
  metricsText?: () => Promise<string>;
  leaseSeconds?: number;
  handoffLeaseSeconds?: number;
  errorClasses?: ErrorClass[];
  /** Show stored error stacks in API responses (default false; development only). */
  exposeErrorStacks?: boolean;
  /**
   * How long the sweeper keeps finished instances (with their history),
   * channel messages and CloudEvent dedupe rows, in seconds (default 7 days
   * each; EDDA_RETENTION_DAYS on the platform adapters).
   */
  retention?: RetentionOptions;
  /**
   * Failures in a row (a step that throws, a timer or delivery that cannot be
   * recorded) after which an instance is set aside as `quarantined` (default 5).
   */
  quarantineAfterFailures?: number;
  /** Realtime streams: bytes of activity chunks one instance's stream may hold (default 8 MiB). */
  streams?: { maxBytes?: number };
  /**
   * Group commit: the lone conclusions of steps ready in the same turn of the event loop go to the
   * database as one multi-row fenced statement (default on, at most 64 per statement; off for a
   * database opened per request, which has no other step to group with). `false`: each step concludes
   * in a statement of its own.
   */
  groupCommit?: GroupCommitOptions | false;
  maxBodyBytes?: number;
  /**
   * Outgoing fetches one invocation (request, sweep, queue batch) may make:
   * follow-ups, outbox deliveries, queue sends (default unlimited; the
   * Workers adapter sets the platform's number).
   */
  subrequestLimit?: number;
  /** Your own routes on the public API (behind its bearer token, before the fallback). */
  routes?: (api: Hono) => void;
  /**
   * Serve workflows as MCP tools at /mcp (Streamable HTTP, stateless):
   * `mcp()` (all of them) or `mcp(["order_saga"])` from `edda-edge/mcp`. A
   * separate entry, so an app without MCP does not bundle the MCP SDK.
   */
  mcp?: ApiSurface;
  /**
   * The viewer at /ui: `viewer()` from `edda-edge/viewer`, its own entry like
   * `mcp()`, so an app without it (a Worker by default) does not bundle its
   * pages. `serveNode` and the Deno adapter turn it on unless `viewer: false`.
   */
  viewer?: ApiSurface | false;
  /**
   * Host values (`host` or `host:port`) this server answers to: without an API
   * token only these and loopback names are served, and browser origins (MCP,
   * viewer actions) are checked against them. The platform adapters fill it
   * from EDDA_ALLOWED_HOSTS and EDDA_PUBLIC_URL (Node adds its loopback
   * address with the bound port); read when a request arrives.
   */
  allowedHosts?: readonly string[];
  /**
   * Reverse proxies or load balancers whose `X-Forwarded-For` names the
   * client (addresses or CIDR ranges; `loopback`, `private`): failed
   * credentials are then throttled per real client, not per proxy. The
   * adapters fill it from EDDA_TRUSTED_PROXIES. Unset: the header is ignored.
   */
  trustedProxies?: readonly string[];
  /** Open event streams (SSE, API and viewer) served at once by this app; past it, 503 with Retry-After (EDDA_MAX_STREAMS, default 256). */
  maxOpenStreams?: number;
  /** Declared webhook sources (`webhook("stripe", { verify: stripeVerifier() })`), served at POST /webhooks/:name. */
  webhooks?: Webhook[];
  /**
   * Each webhook's signing secrets by name; every one listed is accepted (rotation).
   * The platform adapters fill it from EDDA_WEBHOOK_<NAME>_SECRET (comma-separated).
   */
  webhookSecrets?: Record<string, string | string[]>;
}

export interface StartResult {
  instanceId: string;
  status: InstanceStatus;
  /** False when an instance with the given `instanceId` already existed (the call changed nothing). */
  created: boolean;
}

export interface InstancePage {
  /** Newest first. */
  instances: InstanceView[];
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: string | null;
}

/**
 * The app: the Hono app serving the HTTP API, and a client of the same
 * database. Client methods need the long-lived database mode (a `Database`,
 * not a per-request factory), except `sweep`.
 */
export interface Edda {
  readonly app: Hono;
  fetch(request: Request, env?: unknown, ctx?: ExecutionContextLike): Promise<Response>;
  /*
   * These work in both modes. Per request (a database factory), each call
   * opens a database and closes it once the call's background work (follow-up
   * dispatches) is done: pass the platform's `ctx` to hand that work to
   * `ctx.waitUntil` instead of awaiting it.
   */
  start<I>(workflow: Workflow<I, any>, input: I, opts?: StartOptions, ctx?: ExecutionContextLike): Promise<StartResult>;
  start(workflowName: string, input: unknown, opts?: StartOptions, ctx?: ExecutionContextLike): Promise<StartResult>;
  /**
   * The instance and its children (`invoke`/`startChild`); with `history`, the first page of it
   * (at most 500 entries; `historyNextCursor` when there are more).
   */
  getInstance(
    instanceId: string,
    opts?: { history?: boolean },
  ): Promise<InstanceDetail | null>;
  findInstances(query?: ListInstancesQuery): Promise<InstancePage>;
  /** Why the instance is not moving and what will move it (`GET /instances/:id/why`); null if unknown. */
  why(instanceId: string): Promise<WhyView | null>;
  cancel(instanceId: string, cancelledBy?: string, ctx?: ExecutionContextLike): Promise<{ status: InstanceStatus }>;
  /**
   * Retry a quarantined instance (back to the status it had, failure count reset), or resume a
   * `parked` one against the deployed code now (parked again if it still diverges);
   * 409 / ConflictError when it is neither.
   */
  resume(instanceId: string, ctx?: ExecutionContextLike): Promise<{ status: InstanceStatus }>;
  /** The instance once finished, or as it is after `timeoutSeconds` (null if unknown); on Postgres it waits with LISTEN. */
  result(instanceId: string, opts?: { timeoutSeconds?: number; signal?: AbortSignal }): Promise<InstanceView | null>;
  /** Publish a message on a channel (as `POST /channels/:channel/messages`); returns its id. */
  publish(channel: string, data: unknown, opts?: PublishOptions, ctx?: ExecutionContextLike): Promise<string>;
  sweep(opts?: SweepOptions, ctx?: ExecutionContextLike): Promise<SweepReport>;
  readonly dispatcher: Dispatcher;
  close(): Promise<void>;
}

type Invocation = <T>(fn: (engine: Engine, scope: DispatchScope) => Promise<T>, o?: { ctx?: ExecutionContextLike; budget?: SubrequestBudget }) => Promise<T>;

/** What the platform adapters, tests and benchmarks reach behind an Edda; not part of the package's API. */
const internals = new WeakMap<Edda, { engine: () => Promise<Engine>; run: Invocation }>();

function internalsOf(edda: Edda) {
  const i = internals.get(edda);
  if (!i) throw new TypeError("not an Edda created by createEdda");
  return i;
}

/** The engine on the shared database (long-lived mode only). */
export function engineOf(edda: Edda): Promise<Engine> {
  return internalsOf(edda).engine();
}

/**
 * Run `fn` as one invocation (a queue batch, a cron run): an engine — on its
 * own database in per-request mode — and one scope with one subrequest
 * budget. Background work is awaited (or handed to `ctx.waitUntil`) before
 * that database closes.
 */
export function runInvocation<T>(edda: Edda, fn: (engine: Engine, scope: DispatchScope) => Promise<T>, o?: { ctx?: ExecutionContextLike; budget?: SubrequestBudget }): Promise<T> {
  return internalsOf(edda).run(fn, o);
}

function makeDispatcher(opt: DispatcherOption | undefined, secret: string | undefined): Dispatcher {
  if (!opt || opt === "local") return new LocalDispatcher();
  if ("local" in opt) return new LocalDispatcher(opt.local);
  if ("http" in opt) {
    if (!secret) throw new TypeError("the http dispatcher needs a secret (EDDA_SECRET) to sign follow-up requests");
    return new HttpDispatcher({ ...opt.http, secret });
  }
  return opt;
}

function executionCtxOf(c: Context): ExecutionContextLike | undefined {
  try {
    return c.executionCtx as ExecutionContextLike;
  } catch {
    return undefined; // no execution context (Node, Deno)
  }
}

function checkWebhooks(list: Webhook[]): Webhook[] {
  const seen = new Set<string>();
  for (const w of list) {
    if (typeof w?.name !== "string" || typeof w.verify?.verify !== "function") throw new TypeError("webhooks: each entry must come from webhook(name, { verify })");
    if (seen.has(w.name)) throw new TypeError(`webhooks: "${w.name}" is declared twice (${webhookSecretVariable(w.name)} would sign both)`);
    seen.add(w.name);
  }
  return list;
}

/** The app's payload codec: its own, or AES-256-GCM over its keys (checked now: a bad key fails the start, not the first step). */
function payloadCodecOf(opts: EddaOptions): PayloadCodec | null {
  const keys = opts.encryptionKeys === undefined ? [] : typeof opts.encryptionKeys === "string" ? [opts.encryptionKeys] : [...opts.encryptionKeys];
  if (opts.payloadCodec && keys.length) throw new ConfigurationError("encryptionKeys and payloadCodec: give one of them", "EDDA_ENCRYPTION_KEYS");
  if (opts.payloadCodec) return opts.payloadCodec;
  return keys.length ? encryptionCodec(keys) : null;
}

/**
 * An app (the Hono routes, their schemas) built by one createEdda and reused by the next ones given the
 * same holder: building it costs about a millisecond of CPU and its garbage, which a Worker would pay
 * on every invocation. Only for Eddas built from the same options and environment (the Workers
 * adapter keeps one per env object): what differs between them — the engine and the scope of a
 * request — the shared app takes from the Edda whose fetch() is serving the request.
 */
export interface SharedApp {
  app?: Edda["app"];
}

/** The Edda serving a request, on the execution context its fetch() gave the app. */
const SERVING = Symbol("edda.serving");
interface Serving {
  engine(c: Context): Promise<Engine>;
  scope(c: Context): DispatchScope;
}

export function createEdda(opts: EddaOptions): Edda {
  return buildEdda(opts);
}

/** createEdda, the app taken from (or left in) `shared` (internal: the Workers adapter). */
export function createEddaSharingApp(opts: EddaOptions, shared: SharedApp): Edda {
  return buildEdda(opts, shared);
}

function buildEdda(opts: EddaOptions, sharedApp?: SharedApp): Edda {
  checkScheduledInputs(opts.workflows);
  // A deployment id that cannot be stored is refused now, not at the first start.
  if (opts.deployment !== undefined) deploymentOf(opts.deployment, opts.workflows);
  // `mcp: true` or a list was the option before MCP moved to its own entry: the error says how to write it now.
  if (opts.mcp !== undefined) surfaceParts(opts.mcp, "mcp", 'pass mcp() or mcp(["name", …]) from "edda-edge/mcp" (a separate entry, so bundles without MCP do not carry the SDK)').check(opts.workflows);
  if (opts.viewer) surfaceParts(opts.viewer, "viewer", 'pass viewer() from "edda-edge/viewer" (a separate entry, so bundles without the viewer do not carry its pages)').check(opts.workflows);
  // The option before the migrator left the core (a Worker never migrates, and its bundle carried the migrations' SQL).
  if ((opts as { autoMigrate?: unknown }).autoMigrate !== undefined) {
    throw new TypeError('autoMigrate: createEdda does not migrate; call `await migrate(database.db)` (from "edda-edge") before it. serveNode migrates its embedded database itself (and any with autoMigrate: true)');
  }
  const dispatcher = makeDispatcher(opts.dispatcher, opts.secret);
  for (const [name, value] of [["apiToken", opts.apiToken], ["eventsToken", opts.eventsToken]] as const) {
    const list = value === undefined ? [] : Array.isArray(value) ? value : [value];
    if (list.some((t) => typeof t !== "string" || t.trim() === "")) throw new ConfigurationError(`${name} must be a non-empty string: an empty token would turn authentication off`, name === "apiToken" ? "EDDA_API_TOKEN" : "EDDA_EVENTS_TOKEN");
  }
  const webhooks = checkWebhooks(opts.webhooks ?? []);
  const webhookSecrets = new Map(Object.entries(opts.webhookSecrets ?? {}).map(([name, v]) => [name, (Array.isArray(v) ? v : [v]).filter((s) => typeof s === "string" && s !== "")]));
  const tokens = opts.apiToken === undefined ? undefined : Array.isArray(opts.apiToken) ? opts.apiToken : [opts.apiToken];
  const eventTokens = opts.eventsToken === undefined ? undefined : Array.isArray(opts.eventsToken) ? opts.eventsToken : [opts.eventsToken];
  const outbox: OutboxOptions = { ...opts.outbox, ...(opts.brokerUrl ? { brokerUrl: opts.brokerUrl } : {}) };
  const payloadCodec = payloadCodecOf(opts);
  // One registry per app, shared by its engines (one per request in per-request mode).
  const activities = new ActivityRegistry();
  const engineFor = (database: Database) =>
    new Engine({
      storage: createStorage(database),
      workflows: opts.workflows,
      activities,
      dispatcher,
      ...(opts.serviceName ? { serviceName: opts.serviceName } : {}),
      ...(opts.deployment !== undefined ? { deployment: opts.deployment } : {}),
      ...(opts.sweepIntervalSeconds !== undefined ? { sweepIntervalSeconds: opts.sweepIntervalSeconds } : {}),
      ...(opts.cpuBudgetMs !== undefined ? { cpuBudgetMs: opts.cpuBudgetMs } : {}),
      ...(opts.leaseSeconds ? { leaseSeconds: opts.leaseSeconds } : {}),
      ...(opts.handoffLeaseSeconds ? { handoffLeaseSeconds: opts.handoffLeaseSeconds } : {}),
      ...(opts.retryPolicy ? { retryPolicy: opts.retryPolicy } : {}),
      ...(opts.hooks ? { hooks: opts.hooks } : {}),
      ...(opts.tracing ? { tracing: opts.tracing } : {}),
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
      ...(opts.errorClasses ? { errorClasses: opts.errorClasses } : {}),
      ...(opts.exposeErrorStacks ? { exposeErrorStacks: true } : {}),
      ...(opts.retention ? { retention: opts.retention } : {}),
      ...(opts.quarantineAfterFailures !== undefined ? { quarantineAfterFailures: opts.quarantineAfterFailures } : {}),
      // A database opened per request cannot keep a LISTEN for later readers: they poll (bounded).
      streams: { ...opts.streams, ...(perRequest ? { wake: "poll" as const } : {}) },
      // A database opened per request groups too: the steps of one follow-up request or one queue batch run side by side on it.
      ...(opts.groupCommit !== undefined ? { groupCommit: opts.groupCommit } : {}),
      ...(opts.secret ? { webhookLinks: { key: opts.secret, ...(opts.publicUrl ? { baseUrl: opts.publicUrl } : {}) } } : {}),
      outbox,
      ...(payloadCodec ? { payloadCodec } : {}),
      ...(opts.largeValues ? { largeValues: opts.largeValues } : {}),
    });

  const perRequest = typeof opts.database === "function";
  let shared: Promise<{ database: Database; engine: Engine }> | null = null;
  const sharedEngine = async () => {
    if (perRequest) throw new TypeError("engine(): the database is opened per request; use fetch()/sweep()");
    shared ??= (async () => {
      const database = opts.database as Database;
      return { database, engine: engineFor(database) };
    })();
    return (await shared).engine;
  };

  // Per-request mode: one database + engine per request, closed after waitUntil work. Keyed by the request's
  // execution context (fetch() makes one per call), not by c.req.raw: Hono's bodyLimit replaces c.req.raw when a
  // body comes without a content-length, and the client opened under the replacement was never closed.
  const requestEngines = new WeakMap<object, Promise<{ database: Database; engine: Engine }>>();
  const requestEngine = (key: object) => {
    let p = requestEngines.get(key);
    if (!p) {
      p = (async () => {
        const database = await (opts.database as () => Database | Promise<Database>)();
        return { database, engine: engineFor(database) };
      })();
      requestEngines.set(key, p);
    }
    return p;
  };
  const requestKey = (c: Context): object => executionCtxOf(c) ?? c.req.raw;

  const serving: Serving = {
    engine: async (c: Context) => (perRequest ? (await requestEngine(requestKey(c))).engine : sharedEngine()),
    scope: (c: Context) => scopeOf(c),
  };
  const servingOf = (c: Context): Serving => (executionCtxOf(c) as { [SERVING]?: Serving } | undefined)?.[SERVING] ?? serving;
  const app = (sharedApp?.app ?? createApp({
    engine: (c: Context) => servingOf(c).engine(c),
    secret: () => opts.secret,
    workflows: () => opts.workflows,
    apiTokens: () => tokens,
    eventsTokens: () => eventTokens,
    eventsTokenTargeting: opts.eventsTokenTargeting === true,
    ...(opts.maxBodyBytes ? { maxBodyBytes: opts.maxBodyBytes } : {}),
    scope: (c: Context) => servingOf(c).scope(c),
    ...(opts.routes ? { extend: opts.routes } : {}),
    ...(opts.mcp ? { mcp: opts.mcp } : {}),
    ...(opts.viewer ? { viewer: opts.viewer } : {}),
    allowedHosts: () => opts.allowedHosts ?? [],
    ...(opts.trustedProxies ? { trustedProxies: opts.trustedProxies } : {}),
    ...(opts.maxOpenStreams !== undefined ? { maxOpenStreams: opts.maxOpenStreams } : {}),
    ...(webhooks.length ? { webhooks: () => webhooks, webhookSecrets: (name: string) => webhookSecrets.get(name) } : {}),
    ...(opts.metricsText ? { metricsText: opts.metricsText } : {}),
  })) as Edda["app"];
  if (sharedApp) sharedApp.app ??= app;

  // One scope per request: every step of a batch, every CloudEvent of a batch and the outbox share its budget.
  const scopes = new WeakMap<object, DispatchScope>();
  function scopeOf(c: Context): DispatchScope {
    const key = requestKey(c);
    let scope = scopes.get(key);
    if (!scope) {
      scope = invocationScope(executionCtxOf(c));
      scopes.set(key, scope);
    }
    return scope;
  }
  const invocationScope = (ctx: ExecutionContextLike | undefined, hop = 0): DispatchScope => ({
    ...(ctx ? { waitUntil: (p: Promise<unknown>) => ctx.waitUntil(p) } : {}),
    budget: new SubrequestBudget(opts.subrequestLimit ?? Infinity),
    hop,
  });

  async function run<T>(fn: (engine: Engine, scope: DispatchScope) => Promise<T>, o: { ctx?: ExecutionContextLike; budget?: SubrequestBudget } = {}): Promise<T> {
    const withBudget = (scope: DispatchScope) => (o.budget ? { ...scope, budget: o.budget } : scope);
    if (!perRequest) return fn(await sharedEngine(), withBudget(invocationScope(o.ctx)));
    const database = await (opts.database as () => Database | Promise<Database>)();
    const pending: Promise<unknown>[] = [];
    try {
      return await fn(engineFor(database), withBudget(invocationScope({ waitUntil: (p) => pending.push(p) })));
    } finally {
      const done = (async () => {
        for (let i = 0; i < pending.length; i++) await pending[i]!.catch(() => undefined);
        await database.close().catch(() => undefined);
      })();
      if (o.ctx) o.ctx.waitUntil(done);
      else await done;
    }
  }

  const edda: Edda = {
    app,
    dispatcher,
    async fetch(request, env, ctx) {
      if (!perRequest) return app.fetch(request, env, ctx as never);
      const pending: Promise<unknown>[] = [];
      const execCtx: ExecutionContextLike & { passThroughOnException(): void; props: unknown } = {
        waitUntil: (p) => {
          pending.push(p);
        },
        passThroughOnException() {},
        props: {},
      };
      // A shared app (SharedApp) serves this request with this Edda's engine and scope.
      (execCtx as { [SERVING]?: Serving })[SERVING] = serving;
      const res = await app.fetch(request, env, execCtx as never);
      const held = requestEngines.get(execCtx);
      const done = (async () => {
        // Follow-ups may themselves register more background work: drain until quiet.
        for (let i = 0; i < pending.length; i++) await pending[i]!.catch(() => undefined);
        if (held) await (await held).database.close().catch(() => undefined);
      })();
      if (ctx) ctx.waitUntil(done);
      else await done;
      return res;
    },
    start: (wf: Workflow | string, input: unknown, o?: StartOptions, ctx?: ExecutionContextLike) => run((e, scope) => e.start(wf, input, o, scope), ctx ? { ctx } : {}),
    getInstance: (id, o) => run((e) => e.getInstance(id, o)),
    findInstances: (q = {}) => run((e) => e.findInstances(q)),
    why: (id) => run((e) => e.why(id)),
    cancel: (id, by, ctx) => run((e, scope) => e.cancel(id, by, scope), ctx ? { ctx } : {}),
    resume: (id, ctx) => run((e, scope) => e.resume(id, scope), ctx ? { ctx } : {}),
    result: (id, o = {}) => run((e) => e.awaitInstance(id, o.timeoutSeconds ?? 0, o.signal)),
    publish: (channel, data, o, ctx) => run((e, scope) => e.publish(channel, data, o, scope), ctx ? { ctx } : {}),
    sweep: (o, ctx) => run((engine, scope) => engine.sweep(o, scope), ctx ? { ctx } : {}),
    /** Stops the dispatcher. The database stays open: whoever opened it closes it. */
    async close() {
      await dispatcher.close?.();
    },
  };
  internals.set(edda, { engine: sharedEngine, run });
  return edda;
}
