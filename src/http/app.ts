/**
 * The Hono app: the HTTP API of SPEC §5. Handlers are stateless: each gets an
 * engine for the request (shared, or created per request on platforms where
 * database clients must not outlive a request) and returns JSON.
 */
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import { ValidationError } from "../core/errors.ts";
import type { Engine } from "../engine/engine.ts";
import type { DispatchScope, StepRequest } from "../engine/dispatcher.ts";
import { INSTANCE_STATUSES } from "../storage/schema.ts";
import type { InstanceStatus } from "../storage/types.ts";
import { bearerAuth, signedOnly } from "./auth.ts";
import { cloudEventRoutes } from "./cloudevents.ts";
import { mcpRoutes, type McpExposure } from "./mcp/index.ts";
import { onError, problem, readJson } from "./problem.ts";
import { viewer } from "./ui/index.tsx";

export interface AppOptions {
  engine: (c: Context) => Engine | Promise<Engine>;
  secret: () => string | undefined;
  apiTokens: () => string[] | undefined;
  /** Extra tokens accepted by CloudEvents ingestion only. */
  eventsTokens?: () => string[] | undefined;
  /** Default 1 MiB. */
  maxBodyBytes?: number;
  scope?: (c: Context) => DispatchScope | undefined;
  /** Extra routes (CloudEvents, channels) mounted before the fallback. */
  extend?: (app: Hono, helpers: RouteHelpers) => void;
  /** Serve workflows as MCP tools at /mcp: all of them (`true`) or those named. */
  mcp?: McpExposure;
}

export interface RouteHelpers {
  engine: (c: Context) => Promise<Engine>;
  scope: (c: Context) => DispatchScope | undefined;
  parse: <T extends z.ZodType>(schema: T, value: unknown, what: string) => z.output<T>;
}

const startBody = z.object({
  input: z.unknown().optional(),
  instanceId: z.string().min(1).max(200).optional(),
});

const listQuery = z.object({
  status: z
    .string()
    .transform((s) => s.split(",").filter(Boolean))
    .pipe(z.array(z.enum(INSTANCE_STATUSES)))
    .optional(),
  workflow: z.string().min(1).max(255).optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  cursor: z.string().min(1).max(1000).optional(),
  started_after: z.iso.datetime({ offset: true }).optional(),
  started_before: z.iso.datetime({ offset: true }).optional(),
});

const stepRequest = z.object({
  instanceId: z.string().min(1).max(255),
  lease: z.object({ workerId: z.string().min(1).max(255), token: z.number().int().nonnegative() }).optional(),
});
const stepBody = z.union([stepRequest, z.object({ steps: z.array(stepRequest).min(1).max(500) })]);

function parse<T extends z.ZodType>(schema: T, value: unknown, what: string): z.output<T> {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationError(`${what} is invalid`, r.error.issues);
  return r.data;
}

export function createApp(opts: AppOptions): Hono {
  const app = new Hono();
  const engine = async (c: Context) => opts.engine(c);
  const scope = (c: Context) => opts.scope?.(c);
  const maxBytes = opts.maxBodyBytes ?? 1024 * 1024;

  app.onError(onError);
  app.notFound((c) => problem(c, 404, `no route for ${c.req.method} ${new URL(c.req.url).pathname}`, "NotFound"));
  app.use("*", bodyLimit({ maxSize: maxBytes, onError: (c) => problem(c, 413, `request body exceeds ${maxBytes} bytes`, "PayloadTooLarge") }));

  app.get("/healthz", async (c) => {
    try {
      const e = await engine(c);
      await e.storage.getInstance("__healthz__");
      return c.json({ status: "ok", database: "ok" });
    } catch {
      return c.json({ status: "degraded", database: "unreachable" }, 503);
    }
  });

  // Internal routes: signed by EDDA_SECRET.
  app.post("/_edda/step", signedOnly(opts.secret), async (c) => {
    const body = parse(stepBody, await readJson(c), "step request");
    const steps: StepRequest[] = "steps" in body ? body.steps : [body];
    const e = await engine(c);
    const results = [];
    for (const s of steps) results.push({ instanceId: s.instanceId, ...(await e.runStep(s, scope(c))) });
    return c.json(steps.length === 1 ? results[0] : { results });
  });
  app.post("/_edda/sweep", signedOnly(opts.secret), async (c) => {
    const e = await engine(c);
    return c.json(await e.sweep({}, scope(c)));
  });

  app.route("/ui", viewer({ engine, scope, tokens: opts.apiTokens, secret: opts.secret }));

  // Public API.
  const api = new Hono();
  const isIngestion = (c: Context) => c.req.method === "POST" && ["/", "/events"].includes(new URL(c.req.url).pathname);
  api.use("*", bearerAuth(opts.apiTokens, (c) => (isIngestion(c) ? opts.eventsTokens?.() : undefined)));

  api.post("/workflows/:name/instances", async (c) => {
    const e = await engine(c);
    const wf = e.workflow(c.req.param("name"));
    const body = parse(startBody, await readJson(c), "request body");
    const r = await e.start(wf, body.input, body.instanceId ? { instanceId: body.instanceId } : {}, scope(c));
    return c.json({ instanceId: r.instanceId, status: r.status }, r.created ? 201 : 200);
  });

  api.get("/instances/:id", async (c) => {
    const e = await engine(c);
    const withHistory = ["1", "true"].includes(c.req.query("history") ?? "");
    const view = await e.getInstance(c.req.param("id"), { history: withHistory });
    if (!view) return problem(c, 404, `instance "${c.req.param("id")}" not found`, "NotFoundError");
    return c.json(view);
  });

  api.get("/instances", async (c) => {
    const q = listQuery.safeParse(c.req.query());
    if (!q.success) return problem(c, 400, "invalid query parameters", "BadRequest", { issues: q.error.issues });
    const e = await engine(c);
    const page = await e.findInstances({
      ...(q.data.status ? { status: q.data.status as InstanceStatus[] } : {}),
      ...(q.data.workflow ? { workflowName: q.data.workflow } : {}),
      ...(q.data.limit ? { limit: q.data.limit } : {}),
      ...(q.data.cursor ? { cursor: q.data.cursor } : {}),
      ...(q.data.started_after ? { startedAfter: new Date(q.data.started_after) } : {}),
      ...(q.data.started_before ? { startedBefore: new Date(q.data.started_before) } : {}),
    });
    return c.json(page);
  });

  api.post("/instances/:id/cancel", async (c) => {
    const e = await engine(c);
    const r = await e.cancel(c.req.param("id"), "api", scope(c));
    return c.json(r);
  });

  const helpers: RouteHelpers = { engine, scope, parse };
  cloudEventRoutes(api, helpers);
  if (opts.mcp) mcpRoutes(api, helpers, opts.mcp);
  opts.extend?.(api, helpers);
  app.route("/", api);
  return app;
}
