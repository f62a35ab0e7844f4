/**
 * The MCP tools: four per exposed workflow, as Edda names them — `{name}`
 * (start; answers at once with the instance id, or with a task when the call
 * is task-augmented), `{name}_status`, `{name}_result`, `{name}_cancel` — and
 * three for the whole app: `list_instances`, `send_message`, `publish`, and the
 * repair tools (repair-tools.ts: rerun, fork, bulk actions, schedule control).
 *
 * Every call goes through the engine exactly as the HTTP API does. A problem
 * the caller can fix (bad arguments, unknown or foreign instance, nothing to
 * cancel) is a tool result with `isError: true` and a message saying what is
 * wrong — never a transport failure.
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";
import type { Workflow } from "../../core/definitions.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../core/errors.ts";
import { INSTANCE_STATUSES } from "../../core/model.ts";
import { MAX_TAGS, parseTagFilters } from "../../core/tags.ts";
import { formatIssues, inputFromArguments, toolInputSchema } from "./schema.ts";
import { jsonResult, outcome, summarize, toolError } from "./views.ts";
import { repairTools } from "./repair-tools.ts";
import { exposedInstance, jsonSchemaOf, parseArgs, type McpCallContext, type ToolEntry } from "./tool-kit.ts";

const instanceId = z.string().regex(/^[A-Za-z0-9_.:-]{1,200}$/, "an instance id is 1–200 characters of A-Z a-z 0-9 _ . : -");
const instanceArgs = z.object({ instance_id: instanceId }).strict();
const INSTANCE_ARGS_SCHEMA = z.toJSONSchema(instanceArgs) as Tool["inputSchema"];
delete (INSTANCE_ARGS_SCHEMA as Record<string, unknown>).$schema;

const listArgs = z
  .object({
    workflow: z.string().min(1).max(255).optional(),
    status: z.array(z.enum(INSTANCE_STATUSES)).min(1).optional(),
    limit: z.number().int().min(1).max(100).optional(),
    cursor: z.string().min(1).max(1000).optional(),
    tags: z.record(z.string(), z.string()).optional().describe(`only instances with every one of these tags (at most ${MAX_TAGS})`),
  })
  .strict();
const messageArgs = z
  .object({
    instance_id: instanceId,
    channel: z.string().min(1).max(255),
    data: z.unknown().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
const publishArgs = z
  .object({ channel: z.string().min(1).max(255), data: z.unknown().optional(), metadata: z.record(z.string(), z.unknown()).optional() })
  .strict();

function workflowTools(wf: Workflow): [string, ToolEntry][] {
  const name = wf.workflowName;
  const about = wf.options.description ? `${wf.options.description.trim()}\n\n` : "";
  return [
    [
      name,
      {
        starts: wf,
        tool: {
          name,
          description: `${about}Starts the durable workflow "${name}" and returns its instance_id at once; the run continues on the server (it may wait for timers or messages for days). Follow it with ${name}_status and collect the outcome with ${name}_result. Clients that support MCP tasks may call this tool as a task instead.`,
          inputSchema: toolInputSchema(wf),
          execution: { taskSupport: "optional" },
          annotations: { title: `Start ${name}`, readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
        },
        async call(args, ctx) {
          const r = await ctx.engine.start(wf, inputFromArguments(wf, args), {}, ctx.scope);
          return jsonResult(
            { instance_id: r.instanceId, workflow: name, status: r.status },
            false,
            `Started ${name} instance ${r.instanceId}. Poll ${name}_status with { "instance_id": "${r.instanceId}" }.`,
          );
        },
      },
    ],
    [
      `${name}_status`,
      {
        tool: {
          name: `${name}_status`,
          description: `Status of a ${name} instance: its status, how many activities completed, the activity it is at, and a suggested interval before polling again.`,
          inputSchema: INSTANCE_ARGS_SCHEMA,
          annotations: { title: `${name} status`, readOnlyHint: true, openWorldHint: false },
        },
        async call(args, ctx) {
          const { instance_id } = parseArgs(instanceArgs, args, `${name}_status`);
          const found = await exposedInstance(ctx, instance_id, wf);
          return jsonResult({ ...summarize(found.view, found.completed) });
        },
      },
    ],
    [
      `${name}_result`,
      {
        tool: {
          name: `${name}_result`,
          description: `The outcome of a ${name} instance: its output when completed, the error when failed, the cancellation when cancelled; while it runs, its status and when to ask again.`,
          inputSchema: INSTANCE_ARGS_SCHEMA,
          annotations: { title: `${name} result`, readOnlyHint: true, openWorldHint: false },
        },
        async call(args, ctx) {
          const { instance_id } = parseArgs(instanceArgs, args, `${name}_result`);
          return outcome((await exposedInstance(ctx, instance_id, wf)).view, false);
        },
      },
    ],
    [
      `${name}_cancel`,
      {
        tool: {
          name: `${name}_cancel`,
          description: `Cancels a running or waiting ${name} instance. The compensations it registered run (newest first) before it ends cancelled.`,
          inputSchema: INSTANCE_ARGS_SCHEMA,
          annotations: { title: `Cancel ${name}`, readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
        },
        async call(args, ctx) {
          const { instance_id } = parseArgs(instanceArgs, args, `${name}_cancel`);
          await exposedInstance(ctx, instance_id, wf);
          const r = await ctx.engine.cancel(instance_id, "mcp", ctx.scope);
          const note = r.status === "compensating" ? "compensations are running" : "cancelled";
          return jsonResult({ instance_id, workflow: name, status: r.status }, false, `Cancelled ${name} instance ${instance_id}: ${note}.`);
        },
      },
    ],
  ];
}

const appTools: [string, ToolEntry][] = [
  [
    "list_instances",
    {
      tool: {
        name: "list_instances",
        description: "Lists workflow instances, newest first, without their payloads. Filter by workflow, status and tags (all must match); pass next_cursor back as cursor for the next page (a page may hold fewer than limit).",
        inputSchema: jsonSchemaOf(listArgs),
        annotations: { title: "List instances", readOnlyHint: true, openWorldHint: false },
      },
      async call(args, ctx) {
        const q = parseArgs(listArgs, args, "list_instances");
        if (q.workflow && !ctx.exposed.has(q.workflow)) throw new NotFoundError(`unknown workflow "${q.workflow}"`);
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
      },
    },
  ],
  [
    "send_message",
    {
      tool: {
        name: "send_message",
        description: "Sends a message to one instance on a channel (what its waitMessage/receive waits for, e.g. an approval decision).",
        inputSchema: jsonSchemaOf(messageArgs),
        annotations: { title: "Send a message to an instance", readOnlyHint: false, destructiveHint: false, openWorldHint: false },
      },
      async call(args, ctx) {
        const m = parseArgs(messageArgs, args, "send_message");
        await exposedInstance(ctx, m.instance_id);
        const opts = { targetInstanceId: m.instance_id, ...(m.metadata ? { metadata: m.metadata } : {}) };
        const messageId = await ctx.engine.publish(m.channel, m.data ?? null, opts, ctx.scope);
        return jsonResult({ status: "accepted", message_id: messageId, instance_id: m.instance_id, channel: m.channel });
      },
    },
  ],
  [
    "publish",
    {
      tool: {
        name: "publish",
        description: "Publishes a message on a channel; every instance subscribed to it receives it according to the channel's mode (broadcast, competing or direct).",
        inputSchema: jsonSchemaOf(publishArgs),
        annotations: { title: "Publish on a channel", readOnlyHint: false, destructiveHint: false, openWorldHint: false },
      },
      async call(args, ctx) {
        const m = parseArgs(publishArgs, args, "publish");
        const messageId = await ctx.engine.publish(m.channel, m.data ?? null, m.metadata ? { metadata: m.metadata } : {}, ctx.scope);
        return jsonResult({ status: "accepted", message_id: messageId, channel: m.channel });
      },
    },
  ],
];

/** Tool names are unique by construction of the table; a workflow whose generated name collides is refused loudly. */
export function buildToolTable(workflows: Iterable<Workflow>): Map<string, ToolEntry> {
  const table = new Map<string, ToolEntry>();
  const add = ([name, entry]: [string, ToolEntry], owner: string) => {
    if (table.has(name)) throw new TypeError(`mcp: tool name "${name}" (${owner}) is already taken; rename the workflow or leave it out of the mcp option`);
    table.set(name, entry);
  };
  for (const wf of workflows) for (const t of workflowTools(wf)) add(t, `workflow "${wf.workflowName}"`);
  for (const t of appTools) add(t, "built-in tool");
  for (const t of repairTools()) add(t, "built-in tool");
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
