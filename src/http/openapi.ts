/**
 * OpenAPI 3.1 from the routes themselves. A route is documented by putting
 * `documented({...})` in its handler chain: that middleware validates the
 * route's path parameters, query and JSON body with the zod schemas it
 * declares (handlers read the parsed values from `c.var.valid`), and the same
 * schemas become the document. `openApiDocument` walks `app.routes`, so a new
 * route with its `documented` spec appears in `/openapi.json` with no other
 * edit; a route without one fails the coverage test unless it is listed in
 * `UNDOCUMENTED_ROUTES` with a reason.
 */
import type { Hono, MiddlewareHandler } from "hono";
import * as z from "zod";
import { InvalidArgumentError, ValidationError } from "../core/errors.ts";
import type { Workflow } from "../core/definitions.ts";
import { readJson } from "./body.ts";

/**
 * Routes that are deliberately not in the document, as path patterns
 * (`*` matches the rest of the path). Anything else in `app.routes` must be
 * documented.
 */
export const UNDOCUMENTED_ROUTES: readonly { pattern: string; reason: string }[] = [
  { pattern: "/docs", reason: "the HTML reference page for this document" },
  { pattern: "/ui", reason: "the HTML viewer, not an API" },
  { pattern: "/ui/*", reason: "the HTML viewer, not an API" },
  { pattern: "/mcp", reason: "the MCP endpoint, described by the Model Context Protocol (JSON-RPC)" },
  { pattern: "/mcp/*", reason: "the MCP endpoint, described by the Model Context Protocol (JSON-RPC)" },
];

/** Who may call a route. */
export type RouteAuth = "api" | "events" | "internal" | "none";

export interface ResponseSpec {
  description: string;
  /** JSON body (response schemas document; they do not validate). */
  schema?: z.ZodType;
  contentType?: string;
}

type Schema = z.ZodType | undefined;

export interface RouteSpec<P extends Schema = undefined, Q extends Schema = undefined, B extends Schema = undefined> {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: RouteAuth;
  params?: P;
  query?: Q;
  /** JSON request body; an empty body parses as `{}`. Invalid → 422. */
  body?: B;
  /** Name used in the 422 message ("<what> is invalid"). */
  bodyName?: string;
  /** A request body this middleware does not parse (documented as given). */
  rawBody?: { description: string; content: Record<string, { schema: Record<string, unknown> }> };
  /**
   * The route exists once per registered workflow (its `:name` parameter):
   * the document adds a concrete path for each, with this body.
   */
  perWorkflow?: (wf: Workflow) => z.ZodType;
  responses: Record<number, ResponseSpec>;
}

type Out<T> = T extends z.ZodType ? z.output<T> : undefined;
export interface Validated<P extends Schema, Q extends Schema, B extends Schema> {
  params: Out<P>;
  query: Out<Q>;
  body: Out<B>;
}

const ROUTE_SPEC = Symbol.for("edda.routeSpec");
type AnySpec = RouteSpec<Schema, Schema, Schema>;

function parseWith(schema: z.ZodType, value: unknown, fail: (issues: z.core.$ZodIssue[]) => Error): unknown {
  const r = schema.safeParse(value);
  if (!r.success) throw fail(r.error.issues);
  return r.data;
}

/** The validating middleware that also carries the route's OpenAPI description. */
export function documented<P extends Schema = undefined, Q extends Schema = undefined, B extends Schema = undefined>(
  spec: RouteSpec<P, Q, B>,
): MiddlewareHandler<{ Variables: { valid: Validated<P, Q, B> } }> {
  const mw: MiddlewareHandler<{ Variables: { valid: Validated<P, Q, B> } }> = async (c, next) => {
    const params = spec.params ? parseWith(spec.params, c.req.param(), (i) => new InvalidArgumentError("invalid path parameters", i)) : undefined;
    const query = spec.query ? parseWith(spec.query, c.req.query(), (i) => new InvalidArgumentError("invalid query parameters", i)) : undefined;
    const body = spec.body ? parseWith(spec.body, await readJson(c), (i) => new ValidationError(`${spec.bodyName ?? "request body"} is invalid`, i)) : undefined;
    c.set("valid", { params, query, body } as Validated<P, Q, B>);
    await next();
  };
  Object.defineProperty(mw, ROUTE_SPEC, { value: spec });
  return mw;
}

/** The spec carried by a handler in `app.routes` (also through Hono's sub-app wrapping). */
function specOf(handler: unknown): AnySpec | undefined {
  const h = handler as Record<string | symbol, unknown>;
  return (h[ROUTE_SPEC] ?? (h.__COMPOSED_HANDLER as Record<symbol, unknown> | undefined)?.[ROUTE_SPEC]) as AnySpec | undefined;
}

/** `/instances/:id` → `/instances/{id}` (Hono's optional and regexp forms included). */
export function openApiPath(honoPath: string): string {
  return honoPath.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?\??/g, "{$1}");
}

export function isUndocumented(path: string): boolean {
  return UNDOCUMENTED_ROUTES.some(({ pattern }) => (pattern.endsWith("/*") ? path.startsWith(pattern.slice(0, -1)) : path === pattern));
}

/** Route entries that are endpoints (not `use()` middleware), as `{ method, path }` in OpenAPI form. */
export function endpointsOf(app: Hono): { method: string; path: string }[] {
  const seen = new Map<string, { method: string; path: string }>();
  for (const r of app.routes) {
    if (r.method === "ALL" && (r.path === "*" || r.path.endsWith("/*"))) continue;
    const path = openApiPath(r.path);
    seen.set(`${r.method} ${path}`, { method: r.method.toLowerCase(), path });
  }
  return [...seen.values()];
}

const jsonSchema = (schema: z.ZodType, io: "input" | "output") => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any" });
  return rest;
};

export interface DocumentOptions {
  title: string;
  version: string;
  workflows: Iterable<Workflow>;
  /** Whether bearer tokens are configured (the API routes then require one). */
  tokenRequired: boolean;
}

/** RFC 9457 members, then the extensions every problem carries (problem.ts). */
const problemSchema = z
  .object({
    type: z.string().describe("a URI reference; about:blank: the status says it all, error_type is the finer kind"),
    title: z.string().describe("the HTTP status phrase"),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string().optional().describe("the request path"),
    error: z.string().describe("the same as detail (the field clients read before RFC 9457)"),
    error_type: z.string(),
    issues: z.array(z.unknown()).optional().describe("validation issues, each with its path"),
  })
  .loose();

/** The OpenAPI 3.1 document of `app`'s documented routes. */
export function openApiDocument(app: Hono, opts: DocumentOptions): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const workflows = [...opts.workflows];
  for (const r of app.routes) {
    const spec = specOf(r.handler);
    if (!spec) continue;
    const method = r.method.toLowerCase();
    const path = openApiPath(r.path);
    (paths[path] ??= {})[method] = operation(spec, opts, spec.body);
    if (spec.perWorkflow) {
      for (const wf of workflows) {
        const concrete = path.replace("{name}", encodeURIComponent(wf.workflowName));
        const op = operation(
          {
            ...spec,
            operationId: `${spec.operationId}_${wf.workflowName}`,
            summary: `${spec.summary}: ${wf.workflowName}`,
            ...(wf.options.description ? { description: wf.options.description } : {}),
          },
          opts,
          spec.perWorkflow(wf),
        );
        op.parameters = (op.parameters as { name: string }[]).filter((p) => p.name !== "name");
        (paths[concrete] ??= {})[method] = op;
      }
    }
  }
  // Only the schemes some operation names (an unused one is noise to a reader and a lint warning).
  const used = new Set<string>();
  for (const ops of Object.values(paths)) for (const op of Object.values(ops) as { security?: Record<string, unknown>[] }[]) for (const req of op.security ?? []) for (const k of Object.keys(req)) used.add(k);
  const schemes = Object.fromEntries(Object.entries(SECURITY_SCHEMES).filter(([k]) => used.has(k)));
  return {
    openapi: "3.1.0",
    info: {
      title: opts.title,
      version: opts.version,
      // The document is generated by Edda Edge, under its license.
      license: { name: "MIT", identifier: "MIT" },
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    // Relative: the server that served this document (a generated client sets its own base URL).
    servers: [{ url: "/", description: "the server this document was served from" }],
    paths,
    components: {
      ...(Object.keys(schemes).length ? { securitySchemes: schemes } : {}),
      schemas: { Problem: jsonSchema(problemSchema, "output") },
    },
  };
}

const SECURITY_SCHEMES: Record<string, Record<string, unknown>> = {
  bearer: { type: "http", scheme: "bearer", description: "EDDA_API_TOKEN" },
  eventsBearer: { type: "http", scheme: "bearer", description: "EDDA_EVENTS_TOKEN (CloudEvents ingestion only) or EDDA_API_TOKEN" },
  signature: {
    type: "apiKey",
    in: "header",
    name: "x-edda-signature",
    description: "sha256=HMAC-SHA256(EDDA_SECRET, version, method, path, query (when there is one), x-edda-timestamp and body, one per line) in hex (core/signature.ts); x-edda-timestamp in seconds, within 60 s",
  },
};

function operation(spec: AnySpec, opts: DocumentOptions, body: z.ZodType | undefined): Record<string, unknown> {
  const parameters: unknown[] = [];
  for (const [where, schema] of [
    ["path", spec.params],
    ["query", spec.query],
  ] as const) {
    if (!schema) continue;
    const js = jsonSchema(schema, "input") as { properties?: Record<string, unknown>; required?: string[] };
    for (const [name, s] of Object.entries(js.properties ?? {})) {
      parameters.push({ name, in: where, required: where === "path" || (js.required ?? []).includes(name), schema: s });
    }
  }
  const responses: Record<string, unknown> = {};
  for (const [status, r] of Object.entries(spec.responses)) {
    responses[status] = {
      description: r.description,
      ...(r.schema
        ? { content: { [r.contentType ?? "application/json"]: { schema: jsonSchema(r.schema, "output") } } }
        : Number(status) >= 400
          ? { content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } } }
          : {}),
    };
  }
  const problems: Record<number, string> = { 400: "bad request (malformed JSON, invalid parameters)", 500: "internal error (no details)" };
  if (body) problems[422] = "the body failed validation (zod issues in `issues`)";
  if (spec.auth !== "none") problems[401] = spec.auth === "internal" ? "missing or invalid signature" : "missing or invalid bearer token";
  if (body || spec.rawBody) problems[413] = "request body too large";
  for (const [status, description] of Object.entries(problems)) {
    responses[status] ??= { description, content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } } };
  }
  const security =
    spec.auth === "internal" ? [{ signature: [] }] : spec.auth === "none" || !opts.tokenRequired ? [] : spec.auth === "events" ? [{ eventsBearer: [] }] : [{ bearer: [] }];
  return {
    operationId: spec.operationId,
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    tags: spec.tags,
    parameters,
    // An empty body is read as `{}`: the body is required exactly when `{}` would be refused.
    ...(body ? { requestBody: { required: !body.safeParse({}).success, content: { "application/json": { schema: jsonSchema(body, "input") } } } } : {}),
    ...(spec.rawBody ? { requestBody: { required: true, ...spec.rawBody } } : {}),
    responses,
    security,
  };
}

/**
 * Endpoints of `app` missing from `doc` and not listed in UNDOCUMENTED_ROUTES
 * (the coverage test asserts this is empty).
 */
export function undocumentedEndpoints(app: Hono, doc: { paths: Record<string, Record<string, unknown>> }): string[] {
  return endpointsOf(app)
    .filter(({ method, path }) => !isUndocumented(path) && !doc.paths[path]?.[method])
    .map(({ method, path }) => `${method.toUpperCase()} ${path}`);
}
