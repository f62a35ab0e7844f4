/**
 * The Hono app: the HTTP API of SPEC §5. Handlers are stateless: each gets an
 * engine for the request (shared, or created per request on platforms where
 * database clients must not outlive a request) and returns JSON.
 */
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import * as z from "zod";
import type { Workflow } from "../core/definitions.ts";
import type { Engine } from "../engine/engine.ts";
import type { DispatchScope, StepRequest } from "../engine/dispatcher.ts";
import { TRACEPARENT_PATTERN } from "../engine/tracing.ts";
import { PRIORITY_MAX, PRIORITY_MIN } from "../engine/starts.ts";
import { INSTANCE_STATUSES, type InstanceStatus } from "../core/model.ts";
import { MAX_TAGS, parseTagFilters } from "../core/tags.ts";
import { logError } from "../core/log.ts";
import { ValidationError } from "../core/errors.ts";
import { bearerAuth, signedOnly } from "./auth.ts";
import { clientKey, jsonWritesOnly, openModeGuard, type AllowedHosts } from "./guards.ts";
import { TrustedProxies } from "./client-address.ts";
import { cloudEventRoutes } from "./cloudevents.ts";
import { documented } from "./openapi.ts";
import { referenceRoutes } from "./reference.ts";
import { scheduleRoutes } from "./schedules.ts";
import { repairRoutes } from "./repairs.ts";
import { resultRoutes } from "./results.ts";
import { StreamGate } from "./stream-gate.ts";
import { streamRoutes } from "./stream.ts";
import { instanceTransition, operationRoutes } from "./operations.ts";
import { outboxRoutes } from "./outbox.ts";
import { webhookRoutes } from "./webhooks.ts";
import { metricsRoutes } from "./metrics.ts";
import { waitWebhookRoutes } from "./wait-webhooks.ts";
import { whyRoutes } from "./why.ts";
import { sweepOverdue } from "../engine/why.ts";
import { deploymentRoutes } from "./deployments.ts";
import type { Webhook } from "../core/webhooks.ts";
import { instanceNotFound, onError, problem, sqlStateOf } from "./problem.ts";
import { instanceIdParam, instancePage, instanceView, started } from "./schemas.ts";
import { parse, surfaceParts, type ApiSurface, type RouteHelpers, type SurfaceHelpers } from "./routes.ts";

export interface AppOptions {
  engine: (c: Context) => Engine | Promise<Engine>;
  secret: () => string | undefined;
  apiTokens: () => string[] | undefined;
  /** Extra tokens accepted by CloudEvents ingestion only. */
  eventsTokens?: () => string[] | undefined;
  /** The events token may target instances with `eddainstanceid` (default false). */
  eventsTokenTargeting?: boolean;
  /** Default 1 MiB. */
  maxBodyBytes?: number;
  scope?: (c: Context) => DispatchScope | undefined;
  /** Registered workflows (their input schemas are in the OpenAPI document). */
  workflows?: () => Iterable<Workflow>;
  /** Extra routes (CloudEvents, channels) mounted before the fallback. */
  extend?: (app: Hono, helpers: RouteHelpers) => void;
  /** MCP at /mcp: `mcp()` from `edda-edge/mcp` (kept out of the core, see ApiSurface). */
  mcp?: ApiSurface;
  /** The viewer at /ui: `viewer()` from `edda-edge/viewer` (kept out of the core like MCP). */
  viewer?: ApiSurface;
  /** Configured Host values (guards.ts): open mode serves only these and loopback names; browser origins are checked against them. */
  allowedHosts?: AllowedHosts;
  /** Declared webhook sources, served at POST /webhooks/:name (authenticated by their signatures). */
  webhooks?: () => readonly Webhook[];
  /** A webhook's configured secrets (EDDA_WEBHOOK_<NAME>_SECRET). */
  webhookSecrets?: (name: string) => readonly string[] | undefined;
  /** Proxies whose X-Forwarded-For names the client (EDDA_TRUSTED_PROXIES: addresses or CIDR ranges), for the failed-credential throttle. */
  trustedProxies?: readonly string[];
  /** Open event streams (SSE) this app serves at once; past it, 503 with Retry-After (default 256). */
  maxOpenStreams?: number;
  /** The Prometheus text of the app's metrics, served at GET /metrics (Node: platform/metrics.ts); unset → 404. */
  metricsText?: () => Promise<string>;
}

/** A workflow's start body: `input` is required when its schema refuses an absent input (then `{}` is refused too, and the document says so). */
const startBody = (input: z.ZodType = z.unknown()) =>
  z.object({
    input: input.safeParse(undefined).success ? input.optional() : input,
    instanceId: z.string().min(1).max(200).optional().describe("idempotency: starting the same id again returns the existing instance (200)"),
    priority: z.number().int().min(PRIORITY_MIN).max(PRIORITY_MAX).optional().describe("order within a flow-control key's queue: higher leaves first, then the oldest (default 0)"),
  });
/** A start whose body has members but no `input`: the issues stay, the message says how to wrap it. */
function withInputHint(err: ValidationError, text: string): ValidationError {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return err;
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return err;
  const keys = Object.keys(raw).filter((k) => k !== "instanceId" && k !== "priority");
  if (!keys.length) return err;
  const shown = keys.slice(0, 5).map((k) => JSON.stringify(k.slice(0, 40))).join(", ");
  return new ValidationError(`${err.message}: the body has no "input" member; wrap the input as {"input": …} (the body's members: ${shown}${keys.length > 5 ? ", …" : ""})`, err.issues);
}
const nameParam = z.object({ name: z.string().describe("a registered workflow") });

/** How long /readyz waits for its write before it answers 503. */
const READY_TIMEOUT_MS = 2000;
const READY_LOCK = "edda:readyz";
/** How long one readiness outcome answers /readyz (so probes, or anyone, cause at most one write a second). */
const READY_CACHE_MS = 1000;

/** A list page is bounded work: at most this many instances, payload-free unless asked. */
const MAX_PAGE = 100;

const listQuery = z.object({
  status: z
    .string()
    .transform((s) => s.split(",").filter(Boolean))
    .pipe(z.array(z.enum(INSTANCE_STATUSES)))
    .optional(),
  workflow: z.string().min(1).max(255).optional(),
  deployment: z.string().min(1).max(255).optional().describe("instances on this deployment (GET /deployments lists them)"),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).optional().describe(`page size, at most ${MAX_PAGE} (default 50)`),
  cursor: z.string().min(1).max(1000).optional().describe("nextCursor of the previous page"),
  include: z.enum(["payloads"]).optional().describe("payloads: also return each instance's input and output (left out by default)"),
  started_after: z.iso.datetime({ offset: true }).optional(),
  started_before: z.iso.datetime({ offset: true }).optional(),
  tag: z.string().max(400).optional().describe(`key:value — instances with this tag; repeat the parameter for several (all must match, at most ${MAX_TAGS})`),
});

const stepRequest = z.object({
  instanceId: z.string().min(1).max(255),
  lease: z.object({ workerId: z.string().min(1).max(255), token: z.number().int().nonnegative() }).optional(),
  traceparent: z.string().regex(TRACEPARENT_PATTERN).optional(),
});
const hop = z.number().int().min(0).max(1000).optional();
const stepBody = z.union([stepRequest.extend({ hop }), z.object({ steps: z.array(stepRequest).min(1).max(500), hop })]);

/** The repeated `tag=key:value` parameters (the validated query keeps only one of them). */
const tagFilter = (c: Context) => {
  const texts = c.req.queries("tag") ?? [];
  return texts.length ? { tags: parseTagFilters(texts) } : {};
};

/** Mounts an optional surface where it belongs; one given for the other place (mcp() as the viewer) is refused. */
function mountSurface(surface: ApiSurface, option: string, place: "api" | "app", target: Hono, helpers: SurfaceHelpers): void {
  const parts = surfaceParts(surface, option, "not an API surface");
  if (parts.place !== place) throw new TypeError(`${option}: ${surface.name}() is not the ${option} surface`);
  parts.mount(target, helpers);
}

/** Steps of one follow-up request run at once at most: a group commit's batch (group-commit.ts DEFAULT_MAX_BATCH). */
const STEPS_AT_ONCE = 64;

/** Run `fn` over `items`, at most STEPS_AT_ONCE at a time; never rejects (`fn` handles its own failures). */
async function runSideBySide<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(STEPS_AT_ONCE, items.length) }, worker));
}

export function createApp(opts: AppOptions): Hono {
  const app = new Hono();
  const engine = async (c: Context) => opts.engine(c);
  const scope = (c: Context) => opts.scope?.(c);
  const maxBytes = opts.maxBodyBytes ?? 1024 * 1024;

  app.onError(onError);
  app.notFound((c) => problem(c, 404, `no route for ${c.req.method} ${new URL(c.req.url).pathname}`, "NotFound"));
  app.use("*", bodyLimit({ maxSize: maxBytes, onError: (c) => problem(c, 413, `request body exceeds ${maxBytes} bytes`, "PayloadTooLarge") }));
  const hosts = opts.allowedHosts ?? (() => []);
  app.use("*", openModeGuard({ open: () => (opts.apiTokens() ?? []).length === 0, hosts }));

  const health = z.object({ status: z.enum(["ok", "degraded"]), database: z.enum(["ok", "unreachable"]) });
  app.get(
    "/healthz",
    documented({
      operationId: "health",
      summary: "Liveness: the process answers and the database is reachable (a read); /readyz checks the write path",
      tags: ["operations"],
      auth: "none",
      responses: { 200: { description: "healthy", schema: health }, 503: { description: "the database is unreachable", schema: health } },
    }),
    async (c) => {
      try {
        const e = await engine(c);
        await e.checkReadable();
        return c.json({ status: "ok", database: "ok" });
      } catch {
        return c.json({ status: "degraded", database: "unreachable" }, 503);
      }
    },
  );
  type Leases = { expired: number; oldestExpiredSeconds: number };
  type Detail = { leases: Leases; sweep: { lastRunAt: string | null; expectedEverySeconds: number | null; overdue: boolean } };
  let readiness: { at: number; outcome: "writable" | "failing" | "timeout"; leases: Detail | null } | null = null;
  const readyAnswer = (c: Context, r: { outcome: "writable" | "failing" | "timeout"; leases: Detail | null }) => {
    const detail = r.leases ?? {};
    return r.outcome === "writable" ? c.json({ status: "ready", database: r.outcome, ...detail }) : c.json({ status: "not_ready", database: r.outcome, ...detail }, 503);
  };
  const ready = z.object({
    status: z.enum(["ready", "not_ready"]),
    database: z.enum(["writable", "failing", "timeout"]),
    leases: z
      .object({ expired: z.number().int().describe("runnable instances whose lease expired and nobody took over (an engine died or stalled)"), oldestExpiredSeconds: z.number().describe("how long ago the oldest of them expired") })
      .optional()
      .describe("detail: leases the sweep has not retaken yet (it releases them at its next run); readiness does not depend on it"),
    sweep: z
      .object({
        lastRunAt: z.iso.datetime().nullable().describe("when a sweep task last ran against this database; null: never (no cron trigger, no sweeper)"),
        expectedEverySeconds: z.number().nullable().describe("the sweep cadence this app expects (Node's sweep interval, a cron's minute, EDDA_SWEEP_EXPECTED_SECONDS); null: unknown"),
        overdue: z.boolean().describe("no sweep for five times the expected cadence, or never: timers, retries and expired leases are not moving"),
      })
      .optional()
      .describe("detail: the sweep, which fires timers and retakes expired leases"),
  });
  app.get(
    "/readyz",
    documented({
      operationId: "ready",
      summary: `Readiness: a write to the database (a system-lock row, taken and released) within ${READY_TIMEOUT_MS} ms; one outcome answers for ${READY_CACHE_MS} ms`,
      description: "`leases` (when the write succeeded): how many leases expired without being taken over, and how long ago the oldest did — a stall the sweep has not cleared yet (GET /instances/{id}/why says `leased` for each); `sweep.lastRunAt`: when a sweep task last ran (null: never), `sweep.overdue`: none for five times the cadence this app expects (`sweep.expectedEverySeconds`) — a missing cron trigger or a stopped sweeper.",
      tags: ["operations"],
      auth: "none",
      responses: { 200: { description: "ready: writes succeed", schema: ready }, 503: { description: "writes fail or take too long (a full disk, a read-only replica, a statement timeout)", schema: ready } },
    }),
    async (c) => {
      // An unauthenticated probe must not be a way to make the database write at will: the outcome of the
      // last check is the answer for a second (settled outcomes only: a Worker may not await another request's I/O).
      const now = Date.now();
      if (readiness && now - readiness.at < READY_CACHE_MS) return readyAnswer(c, readiness);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<{ outcome: "timeout"; leases: null }>((resolve) => (timer = setTimeout(() => resolve({ outcome: "timeout", leases: null }), READY_TIMEOUT_MS)));
      const write = (async () => {
        const e = await engine(c);
        // The same upsert the sweep's lock takes: a real write through the engine's own path.
        await e.checkWritable(READY_LOCK);
        // A detail, not a condition: a failed read leaves it out.
        const leases = await Promise.all([e.expiredLeases(), e.lastSweepAt()]).then(
          ([l, swept]) => ({
            leases: { expired: l.count, oldestExpiredSeconds: Math.round(l.oldestSeconds * 10) / 10 },
            sweep: { lastRunAt: swept?.toISOString() ?? null, expectedEverySeconds: e.sweepIntervalSeconds, overdue: sweepOverdue(swept, e.clock(), e.sweepIntervalSeconds) },
          }),
          () => null,
        );
        return { outcome: "writable" as const, leases };
      })().catch((err: unknown) => {
        console.error(`edda: readiness check failed: ${err instanceof Error ? err.name : "error"}${sqlStateOf(err) ? ` (SQLSTATE ${sqlStateOf(err)})` : ""}`);
        return { outcome: "failing" as const, leases: null };
      });
      const r = await Promise.race([write, timeout]);
      clearTimeout(timer);
      readiness = { at: Date.now(), ...r };
      return readyAnswer(c, r);
    },
  );

  // Internal routes: signed by EDDA_SECRET.
  app.post(
    "/_edda/step",
    signedOnly(opts.secret),
    documented({
      operationId: "runStep",
      summary: "Accept follow-up steps; they run in this request's background work (fetch follow-ups)",
      tags: ["internal"],
      auth: "internal",
      body: stepBody,
      bodyName: "step request",
      responses: { 202: { description: "accepted: the steps run after the response", schema: z.object({ accepted: z.number().int() }) } },
    }),
    async (c) => {
      const body = c.var.valid.body;
      const steps: StepRequest[] = "steps" in body ? body.steps : [{ instanceId: body.instanceId, ...(body.lease ? { lease: body.lease } : {}), ...(body.traceparent ? { traceparent: body.traceparent } : {}) }];
      const e = await engine(c);
      const s = scope(c);
      if (s) s.hop = body.hop ?? 0;
      // Acknowledge at once and run the steps in this invocation's own background
      // work: the sender's invocation does not stay open for the chain behind it.
      // The steps of one request run side by side (STEPS_AT_ONCE at a time), so their conclusions share a group commit.
      const work = runSideBySide(steps, (step) =>
        e.runStep(step, s).then(
          () => undefined,
          (err: unknown) => logError("edda: follow-up step failed (the sweeper will resume it)", err, { instance_id: step.instanceId }),
        ),
      );
      s?.waitUntil?.(work);
      return c.json({ accepted: steps.length }, 202);
    },
  );
  app.post(
    "/_edda/sweep",
    signedOnly(opts.secret),
    documented({
      operationId: "sweep",
      summary: "Sweep expired timers, waits, leases and outbox rows (cron)",
      tags: ["internal"],
      auth: "internal",
      responses: { 200: { description: "what the sweep did", schema: z.record(z.string(), z.unknown()) } },
    }),
    async (c) => {
      const e = await engine(c);
      return c.json(await e.sweep({}, scope(c)));
    },
  );

  // Public API.
  const api = new Hono();
  const helpers: RouteHelpers = { engine, scope, parse, hosts, streams: new StreamGate(opts.maxOpenStreams) };
  const proxies = TrustedProxies.parse(opts.trustedProxies ?? []);
  const client = (c: Context) => clientKey(c, proxies);
  const surfaceHelpers: SurfaceHelpers = { ...helpers, apiTokens: opts.apiTokens, secret: opts.secret, clientKey: client };
  // Before the API is routed at "/": the viewer answers /ui itself (its own login), the API's bearer check never sees it.
  if (opts.viewer) mountSurface(opts.viewer, "viewer", "app", app, surfaceHelpers);
  else {
    // Off (a Worker by default): say how to turn it on, rather than the API's 401 for a path it does not have.
    const off = (c: Context) => problem(c, 404, 'the viewer is not enabled in this app: pass viewer: viewer() from "edda-edge/viewer"', "NotFound");
    app.all("/ui", off);
    app.all("/ui/*", off);
  }
  // Before the API's bearer auth: a webhook sender signs its deliveries instead.
  if (opts.webhooks) webhookRoutes(app, helpers, { webhooks: opts.webhooks, secrets: opts.webhookSecrets ?? (() => undefined) });
  // The per-wait URLs of createWebhook: the unguessable token is the credential.
  waitWebhookRoutes(app, helpers);
  const isIngestion = (c: Context) => c.req.method === "POST" && ["/", "/events"].includes(new URL(c.req.url).pathname);
  api.use("*", bearerAuth({ apiTokens: opts.apiTokens, ...(opts.eventsTokens ? { eventsTokens: opts.eventsTokens } : {}), isIngestion, eventsTokenTargeting: opts.eventsTokenTargeting === true, clientKey: client }));
  api.use("*", jsonWritesOnly(isIngestion));

  api.post(
    "/workflows/:name/instances",
    documented({
      operationId: "startInstance",
      summary: "Start a workflow instance",
      tags: ["instances"],
      auth: "api",
      params: nameParam,
      body: startBody(),
      perWorkflow: (wf) => startBody(wf.options.input ?? z.unknown()),
      responses: {
        201: { description: "created", schema: started },
        200: { description: "an existing instance: one with this instanceId, or the unfinished instance of a singleton key, or the pending instance of a debounce key (which takes this input)", schema: started },
        404: { description: "unknown workflow" },
      },
    }),
    async (c) => {
      const e = await engine(c);
      const wf = e.workflow(c.var.valid.params.name);
      const body = c.var.valid.body;
      try {
        const r = await e.start(wf, body.input, { ...(body.instanceId ? { instanceId: body.instanceId } : {}), ...(body.priority !== undefined ? { priority: body.priority } : {}) }, scope(c));
        return c.json({ instanceId: r.instanceId, status: r.status }, r.created ? 201 : 200);
      } catch (err) {
        // The commonest first mistake: the input posted as the body itself. The body was read once already (Hono keeps it).
        if (err instanceof ValidationError && body.input === undefined) throw withInputHint(err, await c.req.text());
        throw err;
      }
    },
  );

  api.get(
    "/instances/:id",
    documented({
      operationId: "getInstance",
      summary: "An instance's status, input, output and error",
      tags: ["instances"],
      auth: "api",
      params: instanceIdParam,
      query: z.object({ history: z.enum(["1", "true", "0", "false"]).optional().describe("include the history") }),
      responses: { 200: { description: "the instance", schema: instanceView }, 404: { description: "unknown instance" } },
    }),
    async (c) => {
      const e = await engine(c);
      const { params, query } = c.var.valid;
      const view = await e.getInstance(params.id, { history: query.history === "1" || query.history === "true" });
      if (!view) return instanceNotFound(c, params.id);
      return c.json(view);
    },
  );

  api.get(
    "/instances",
    documented({
      operationId: "listInstances",
      summary: "List instances, newest first, with filters and paging",
      tags: ["instances"],
      auth: "api",
      query: listQuery,
      responses: { 200: { description: "a page of instances", schema: instancePage } },
    }),
    async (c) => {
      const q = c.var.valid.query;
      const e = await engine(c);
      const page = await e.findInstances({
        ...(q.status ? { status: q.status as InstanceStatus[] } : {}),
        ...(q.workflow ? { workflowName: q.workflow } : {}),
        ...(q.deployment ? { deployment: q.deployment } : {}),
        ...(q.limit ? { limit: q.limit } : {}),
        ...(q.cursor ? { cursor: q.cursor } : {}),
        ...(q.started_after ? { startedAfter: new Date(q.started_after) } : {}),
        ...(q.started_before ? { startedBefore: new Date(q.started_before) } : {}),
        ...tagFilter(c),
      });
      if (q.include === "payloads") return c.json(page);
      return c.json({ ...page, instances: page.instances.map(({ input: _input, output: _output, ...summary }) => summary) });
    },
  );

  instanceTransition(api, helpers, {
    action: "cancel",
    operationId: "cancelInstance",
    summary: "Cancel a running, waiting or quarantined instance (compensations run first)",
    ok: "cancelled, or compensating before it ends cancelled",
    conflict: "the instance has already finished",
    run: (e, id, s) => e.cancel(id, "api", s),
  });

  cloudEventRoutes(api, helpers);
  resultRoutes(api, helpers);
  whyRoutes(api, helpers);
  deploymentRoutes(api, helpers);
  streamRoutes(api, helpers);
  operationRoutes(api, helpers);
  scheduleRoutes(api, helpers);
  repairRoutes(api, helpers);
  outboxRoutes(api, helpers);
  metricsRoutes(api, helpers, opts.metricsText);
  if (opts.mcp) mountSurface(opts.mcp, "mcp", "api", api, surfaceHelpers);
  referenceRoutes(app, api, { workflows: opts.workflows ?? (() => []), tokenRequired: () => (opts.apiTokens() ?? []).length > 0 });
  opts.extend?.(api, helpers);
  app.route("/", api);
  return app;
}
