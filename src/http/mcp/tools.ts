/**
 * The MCP tools. By default a fixed, small set whatever the number of
 * workflows (an MCP client chooses worse among many tools, and some cap the
 * count or the context the list takes): `start_workflow` (a workflow by name
 * with its input; answers at once with the instance id, or with a task when
 * the call is task-augmented), `instance_status`, `instance_why` (why it is not
 * moving, engine/why.ts), `instance_result`,
 * `cancel_instance`, `list_instances`, `list_workflows` (each workflow's
 * input schema; also the `edda://workflows` resource), `send_message` (to one
 * instance, or published on a channel), and the repair tools
 * (repair-tools.ts). The per-workflow tools (workflow-tools.ts) come by
 * opt-in, beside these.
 *
 * Every call goes through the engine exactly as the HTTP API does. A problem
 * the caller can fix (bad arguments, unknown or foreign instance, nothing to
 * cancel) is a tool result with `isError: true` and a message saying what is
 * wrong — never a transport failure.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";
import type { Workflow } from "../../core/definitions.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../core/errors.ts";
import { MAX_TAGS, parseTagFilters } from "../../core/tags.ts";
import { formatIssues, inputJsonSchema } from "./schema.ts";
import { jsonResult, outcome, summarize, toolError } from "./views.ts";
import { repairTools, statusFilter } from "./repair-tools.ts";
import { workflowTools } from "./workflow-tools.ts";
import { exposedInstance, instanceId, parseArgs, tool, type McpCallContext, type ToolEntry } from "./tool-kit.ts";

const instanceArgs = z.object({ instance_id: instanceId }).strict();

const listArgs = z
  .object({
    workflow: z.string().min(1).max(255).optional(),
    status: statusFilter,
    limit: z.number().int().min(1).max(100).optional(),
    cursor: z.string().min(1).max(1000).optional(),
    tags: z.record(z.string(), z.string()).optional().describe(`only instances with every one of these tags (at most ${MAX_TAGS})`),
  })
  .strict();

const messageArgs = z
  .object({
    channel: z.string().min(1).max(255),
    data: z.unknown().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    instance_id: instanceId.optional().describe("deliver to this instance only (what its waitMessage/receive waits for); without it the message is published on the channel to its subscribers"),
  })
  .strict();

/** The exposed workflow `name` names, or a NotFoundError a client can act on. */
function exposedWorkflow(ctx: McpCallContext, name: string): Workflow {
  const wf = ctx.exposed.get(name);
  if (!wf) throw new NotFoundError(`unknown workflow "${name}" (list_workflows lists them)`);
  return wf;
}

/** What `list_workflows` and the `edda://workflows` resource say of each workflow. */
export function workflowListing(ctx: McpCallContext) {
  return [...ctx.exposed.values()].map((wf) => ({
    name: wf.workflowName,
    description: wf.options.description ?? null,
    input_schema: inputJsonSchema(wf),
    tools: ctx.perWorkflow.has(wf.workflowName) ? workflowTools(wf).map(([name]) => name) : [],
  }));
}

function startTool(names: readonly string[]): [string, ToolEntry] {
  const args = z
    .object({
      workflow: (names.length ? z.enum(names as [string, ...string[]]) : z.string().min(1)).describe("the workflow to start (list_workflows gives each one's description and input schema)"),
      input: z.unknown().optional().describe("the workflow's input, as its input_schema in list_workflows says"),
    })
    .strict();
  const starts = (a: Record<string, unknown> | undefined, ctx: McpCallContext) => {
    const { workflow, input } = parseArgs(args, a, "start_workflow");
    return { wf: exposedWorkflow(ctx, workflow), input };
  };
  return tool(
    "start_workflow",
    "Start a workflow",
    "Starts a durable workflow by name with its input and returns its instance_id at once; the run continues on the server (it may wait for timers or messages for days). Follow it with instance_status and collect the outcome with instance_result. Clients that support MCP tasks may call this tool as a task instead.",
    args,
    { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    async (a, ctx) => {
      const wf = exposedWorkflow(ctx, a.workflow);
      try {
        const r = await ctx.engine.start(wf, a.input, {}, ctx.scope);
        return jsonResult({ instance_id: r.instanceId, workflow: wf.workflowName, status: r.status }, false, `Started ${wf.workflowName} instance ${r.instanceId}. Poll instance_status with { "instance_id": "${r.instanceId}" }.`);
      } catch (err) {
        // The schema the input missed, beside the issues: a client that has not read list_workflows can correct the call at once.
        if (err instanceof ValidationError) return toolError(`${err.message}:\n${formatIssues(err.issues)}`, { error_type: "ValidationError", issues: err.issues, input_schema: inputJsonSchema(wf) });
        throw err;
      }
    },
    { starts, execution: { taskSupport: "optional" } },
  );
}

const genericTools: [string, ToolEntry][] = [
  tool("instance_status", "Instance status", "Status of an instance: its status, how many activities completed, the activity it is at, and a suggested interval before polling again.", instanceArgs, { readOnlyHint: true }, async (a, ctx) => {
    const found = await exposedInstance(ctx, a.instance_id);
    return jsonResult({ ...summarize(found.view, found.completed) });
  }),
  tool(
    "instance_why",
    "Why an instance is not moving",
    "Why an instance is where it is and what will move it: the reason's kind (running, timer, message, event, child, webhook, concurrency, rate_limit, debounce, retry_backoff, leased, dispatch_pending, pinned, parked, quarantined, none), since and until when, what it waits behind, one sentence of detail and one of what moves it (and what an operator can do: send, resume, rerun, cancel).",
    instanceArgs,
    { readOnlyHint: true },
    async (a, ctx) => {
      await exposedInstance(ctx, a.instance_id);
      const why = await ctx.engine.why(a.instance_id);
      if (!why) throw new NotFoundError(`instance "${a.instance_id}" not found`);
      const { reason } = why;
      // Children of workflows this surface does not expose do not exist for its clients.
      const shown =
        reason.kind === "child"
          ? (() => {
              const children = reason.facts.children.filter((c) => ctx.exposed.has(c.workflowName));
              return { ...reason, blockedBy: children.map((c) => c.instanceId), facts: { ...reason.facts, children } };
            })()
          : reason;
      return jsonResult({ instance_id: why.instanceId, status: why.status, reason: shown }, false, `${why.instanceId} ${why.status}: ${shown.kind}: ${shown.detail}. Next: ${shown.next}`);
    },
  ),
  tool("instance_result", "Instance result", "The outcome of an instance: its output when completed, the error when failed, the cancellation when cancelled; while it runs, its status and when to ask again.", instanceArgs, { readOnlyHint: true }, async (a, ctx) => outcome((await exposedInstance(ctx, a.instance_id)).view, false)),
  tool("cancel_instance", "Cancel an instance", "Cancels a running or waiting instance. The compensations it registered run (newest first) before it ends cancelled.", instanceArgs, { readOnlyHint: false, destructiveHint: true, idempotentHint: true }, async (a, ctx) => {
    const { view } = await exposedInstance(ctx, a.instance_id);
    const r = await ctx.engine.cancel(a.instance_id, "mcp", ctx.scope);
    const note = r.status === "compensating" ? "compensations are running" : "cancelled";
    return jsonResult({ instance_id: a.instance_id, workflow: view.workflowName, status: r.status }, false, `Cancelled ${view.workflowName} instance ${a.instance_id}: ${note}.`);
  }),
  tool("list_instances", "List instances", "Lists workflow instances, newest first, without their payloads. Filter by workflow, status (one or several) and tags (all must match); pass next_cursor back as cursor for the next page (a page may hold fewer than limit).", listArgs, { readOnlyHint: true }, async (q, ctx) => {
    if (q.workflow) exposedWorkflow(ctx, q.workflow);
    const page = await ctx.engine.findInstances({
      ...(q.workflow ? { workflowName: q.workflow } : {}),
      ...(q.status ? { status: q.status } : {}),
      limit: q.limit ?? 20,
      ...(q.cursor ? { cursor: q.cursor } : {}),
      ...(q.tags ? { tags: parseTagFilters(Object.entries(q.tags).map(([k, v]) => `${k}:${v}`)) } : {}),
    });
    const instances = page.instances
      .filter((i) => ctx.exposed.has(i.workflowName))
      .map((i) => ({ instance_id: i.instanceId, workflow: i.workflowName, status: i.status, started_at: i.startedAt, updated_at: i.updatedAt }));
    return jsonResult({ instances, next_cursor: page.nextCursor });
  }),
  tool("list_workflows", "List workflows", "The workflows start_workflow can start: each one's name, description and input JSON schema.", z.object({}).strict(), { readOnlyHint: true }, async (_a, ctx) => jsonResult({ workflows: workflowListing(ctx) })),
  tool("send_message", "Send a message", "Sends a message on a channel: with instance_id to that instance only (what its waitMessage/receive waits for, e.g. an approval decision); without it, published to every instance subscribed to the channel according to its mode (broadcast, competing or direct).", messageArgs, { readOnlyHint: false, destructiveHint: false }, async (m, ctx) => {
    if (m.instance_id !== undefined) await exposedInstance(ctx, m.instance_id);
    const opts = { ...(m.instance_id !== undefined ? { targetInstanceId: m.instance_id } : {}), ...(m.metadata ? { metadata: m.metadata } : {}) };
    const messageId = await ctx.engine.publish(m.channel, m.data ?? null, opts, ctx.scope);
    return jsonResult({ status: "accepted", message_id: messageId, channel: m.channel, ...(m.instance_id !== undefined ? { instance_id: m.instance_id } : {}) });
  }),
];

/**
 * The tool table for these exposed workflows: the generic tools, then the
 * per-workflow ones of `perWorkflow`. A per-workflow tool whose name is taken
 * (by a generic tool or another workflow's) is refused loudly.
 */
export function buildToolTable(exposed: Iterable<Workflow>, perWorkflow: ReadonlySet<string>): Map<string, ToolEntry> {
  const table = new Map<string, ToolEntry>();
  const add = ([name, entry]: [string, ToolEntry], owner: string) => {
    if (table.has(name)) throw new TypeError(`mcp: tool name "${name}" (${owner}) is already taken; rename the workflow or leave it out of the per-workflow tools`);
    table.set(name, entry);
  };
  const workflows = [...exposed];
  for (const t of [startTool(workflows.map((wf) => wf.workflowName)), ...genericTools, ...repairTools()]) add(t, "built-in tool");
  for (const wf of workflows) if (perWorkflow.has(wf.workflowName)) for (const t of workflowTools(wf)) add(t, `workflow "${wf.workflowName}"`);
  return table;
}

/** A caller-fixable error as a tool error; anything else is logged and reported without details. */
export function toToolError(err: unknown): CallToolResult {
  if (err instanceof ValidationError) {
    return toolError(`${err.message}:\n${formatIssues(err.issues)}`, { error_type: "ValidationError", issues: err.issues });
  }
  if (err instanceof NotFoundError) return toolError(err.message, { error_type: "NotFoundError" });
  if (err instanceof ConflictError) return toolError(err.message, { error_type: "ConflictError" });
  console.error("edda: MCP tool call failed", err);
  return toolError("internal error", { error_type: "InternalError" });
}

export type { McpCallContext, ToolEntry };
