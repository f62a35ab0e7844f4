/**
 * `/mcp`: the Model Context Protocol endpoint (Streamable HTTP transport,
 * stateless). Every POST gets a fresh SDK server and transport built from
 * the request's engine, answers with plain JSON — or, for a `tasks/result`
 * carrying a progress token, with an SSE response of progress notifications
 * and then the result (progress.ts) — and keeps nothing: no session id, no
 * stream to resume, so any Worker isolate, Deno isolate or
 * Node process answers any request. There is no standalone server-to-client
 * stream (GET) and no session to end (DELETE): both are 405, as the
 * transport's stateless mode prescribes.
 *
 * The route sits behind the API's bearer token and body limit like every
 * other public route. Requests a browser sends from another origin are
 * refused, checked against the configured hosts (guards.ts) rather than the
 * request's own Host, so a page cannot drive a local server through DNS
 * rebinding.
 */
import type { Context, Hono } from "hono";
import type { Workflow } from "../../core/definitions.ts";
import type { DispatchScope } from "../../engine/dispatcher.ts";
import { defineSurface, type ApiSurface, type RouteHelpers } from "../routes.ts";
import { originAllowed } from "../guards.ts";
import { jsonTooDeep, MAX_JSON_DEPTH } from "../body.ts";
import { buildToolTable, type ToolEntry } from "./tools.ts";

/** Which workflows MCP serves: `true` every one, a list only these (unknown names are refused). */
export type McpExposure = boolean | readonly string[];

export interface McpOptions {
  /** The workflows MCP serves (default: every one); instances of the others do not exist for its clients. */
  workflows?: McpExposure;
  /**
   * `"generic"` (the default): a fixed set of tools whatever the number of workflows —
   * start_workflow, instance_status, instance_result, cancel_instance, list_instances,
   * list_workflows, send_message and the repair tools. `"per-workflow"`: also `{name}`,
   * `{name}_status`, `{name}_result` and `{name}_cancel` for every served workflow; a list of
   * names: those four for the listed workflows only.
   */
  tools?: "generic" | "per-workflow" | readonly string[];
}

const SERVER_VERSION = "0.1.0";

function exposedWorkflows(all: ReadonlyMap<string, Workflow>, exposure: McpExposure): Map<string, Workflow> {
  if (exposure === true) return new Map(all);
  const exposed = new Map<string, Workflow>();
  for (const name of exposure || []) {
    const wf = all.get(name);
    if (!wf) throw new TypeError(`mcp: unknown workflow "${name}" in the list of exposed workflows`);
    exposed.set(name, wf);
  }
  return exposed;
}

function perWorkflowTools(exposed: ReadonlyMap<string, Workflow>, tools: McpOptions["tools"]): Set<string> {
  if (tools === undefined || tools === "generic") return new Set();
  if (tools === "per-workflow") return new Set(exposed.keys());
  for (const name of tools) if (!exposed.has(name)) throw new TypeError(`mcp: "${name}" in tools is not a workflow MCP serves`);
  return new Set(tools);
}

interface Served {
  exposed: Map<string, Workflow>;
  perWorkflow: Set<string>;
  tools: Map<string, ToolEntry>;
}

/** What MCP serves for an app's workflows: built once per workflow set (a Worker builds an MCP server per request). */
function servedFor(all: ReadonlyMap<string, Workflow>, opts: McpOptions, cache?: WeakMap<ReadonlyMap<string, Workflow>, Served>): Served {
  const hit = cache?.get(all);
  if (hit) return hit;
  const exposed = exposedWorkflows(all, opts.workflows ?? true);
  const perWorkflow = perWorkflowTools(exposed, opts.tools);
  const served = { exposed, perWorkflow, tools: buildToolTable(exposed.values(), perWorkflow) };
  cache?.set(all, served);
  return served;
}

/** Refuses, when the app is built, options naming unknown workflows or producing clashing tool names. */
export function checkMcpExposure(workflows: readonly Workflow[], opts: McpOptions): void {
  servedFor(new Map(workflows.map((wf) => [wf.workflowName, wf])), opts);
}

/**
 * The SDK (with ajv under it, ~1 s to load on a busy machine) is imported on
 * the first /mcp request, so a Node server nobody asks over MCP starts and
 * idles without it. Bundlers inline it all the same (it is this entry's).
 */
let sdk: Promise<[typeof import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"), typeof import("./server.ts")]> | undefined;
const loadSdk = () => (sdk ??= Promise.all([import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"), import("./server.ts")]));

function rpcError(status: number, code: number, message: string, headers: Record<string, string> = {}): Response {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id: null }, { status, headers });
}

/** Whether the body holds a `tasks/result` request carrying a progress token (progress.ts streams those). */
export function asksForProgress(body: unknown): boolean {
  return (Array.isArray(body) ? body : [body]).some((m) => {
    const msg = (m ?? {}) as { method?: unknown; id?: unknown; params?: { _meta?: { progressToken?: unknown } } };
    return msg.method === "tasks/result" && msg.id !== undefined && msg.params?._meta?.progressToken !== undefined;
  });
}

/**
 * An SSE answer outlives the handler: the server closes once its body has
 * been read to the end or the client went away (closing aborts the request
 * handlers), and the body is the request's background work, so a database
 * opened for this request (Workers) stays open until then.
 */
function closingAfterBody(res: Response, close: () => Promise<void>, scope: DispatchScope | undefined, gone: AbortSignal | undefined): Response {
  const reader = res.body!.getReader();
  let finish: () => void = () => {};
  scope?.waitUntil?.(new Promise<void>((resolve) => (finish = resolve)));
  let ending: Promise<void> | null = null;
  const end = () => (ending ??= close().finally(finish));
  gone?.addEventListener("abort", () => void end(), { once: true });
  const body = new ReadableStream<Uint8Array>({
    async pull(ctl) {
      try {
        const next = await reader.read();
        if (!next.done) return ctl.enqueue(next.value);
        ctl.close();
      } catch (err) {
        ctl.error(err);
      }
      await end();
    },
    async cancel(reason) {
      await reader.cancel(reason).catch(() => undefined);
      await end();
    },
  });
  return new Response(body, { status: res.status, headers: res.headers });
}

export function mcpRoutes(app: Hono, h: RouteHelpers, opts: McpOptions): void {
  const cache = new WeakMap<ReadonlyMap<string, Workflow>, Served>();
  app.post("/mcp", async (c: Context) => {
    // A browser's request from another origin is refused: the origins are the configured hosts (guards.ts), never the request's Host alone.
    const origin = c.req.header("origin");
    if (origin !== undefined && !originAllowed(c, origin, h.hosts?.() ?? [])) return rpcError(403, -32000, "Forbidden: cross-origin request refused");
    // Parsed here so the API's nesting limit holds for MCP too (the SDK parses without one).
    const text = await c.req.text();
    if (jsonTooDeep(text)) return rpcError(400, -32700, `Parse error: request body nests deeper than ${MAX_JSON_DEPTH} levels`);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return rpcError(400, -32700, "Parse error: Invalid JSON");
    }
    const engine = await h.engine(c);
    const [{ WebStandardStreamableHTTPServerTransport }, { createMcpServer }] = await loadSdk();
    const { exposed, perWorkflow, tools } = servedFor(engine.workflows, opts, cache);
    const server = createMcpServer({ engine, exposed, perWorkflow, scope: h.scope(c) }, tools, { name: engine.serviceName, version: SERVER_VERSION });
    // Plain JSON, except for a tasks/result that asked for progress: its notifications need an SSE response.
    const streams = asksForProgress(body);
    const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: !streams });
    await server.connect(transport);
    let res: Response;
    try {
      res = await transport.handleRequest(c.req.raw, { parsedBody: body });
    } catch (err) {
      await server.close();
      throw err;
    }
    if (!streams || !res.body) {
      await server.close();
      return res;
    }
    return closingAfterBody(res, () => server.close(), h.scope(c), c.req.raw.signal);
  });
  const notAllowed = () => rpcError(405, -32000, "Method not allowed: this MCP server is stateless (POST only).", { allow: "POST" });
  app.get("/mcp", notAllowed);
  app.delete("/mcp", notAllowed);
}

/**
 * The `mcp` option of `createEdda` / `serveNode` / `createWorker` /
 * `serveDeno`: MCP at /mcp with the generic tools for every workflow
 * (`mcp()`), for only those named (`mcp(["a", "b"])` or `{ workflows }`), and
 * per-workflow tools by opt-in (`mcp({ tools: "per-workflow" })`).
 */
export function mcp(options: McpExposure | McpOptions = {}): ApiSurface {
  const opts: McpOptions = typeof options === "boolean" || Array.isArray(options) ? { workflows: options as McpExposure } : (options as McpOptions);
  return defineSurface("mcp", {
    check: (workflows) => checkMcpExposure(workflows, opts),
    place: "api",
    mount: (api, helpers) => mcpRoutes(api, helpers, opts),
  });
}
