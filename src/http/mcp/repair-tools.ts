/**
 * The MCP repair tools: rerun and fork one instance, a bulk action by filter
 * (with a dry run) and its progress, and schedule control. Only exposed
 * workflows: a bulk action names one, and an instance of another does not
 * exist for MCP clients.
 */
import * as z from "zod";
import { NotFoundError } from "../../core/errors.ts";
import { INSTANCE_STATUSES } from "../../core/model.ts";
import { bulkView } from "../../engine/bulk.ts";
import { exposedInstance, jsonSchemaOf, parseArgs, type McpCallContext, type ToolEntry } from "./tool-kit.ts";
import { jsonResult } from "./views.ts";

const id = z.string().regex(/^[A-Za-z0-9_.:-]{1,200}$/, "an instance id is 1–200 characters of A-Z a-z 0-9 _ . : -");
const requestId = z.string().regex(/^[A-Za-z0-9_.:-]{1,100}$/).optional().describe("idempotency: the same request id returns what the first call made");

function exposedWorkflow(ctx: McpCallContext, name: string): void {
  if (!ctx.exposed.has(name)) throw new NotFoundError(`unknown workflow "${name}"`);
}

function tool<S extends z.ZodType>(name: string, title: string, description: string, schema: S, hints: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean }, call: (a: z.output<S>, ctx: McpCallContext) => Promise<ReturnType<typeof jsonResult>>): [string, ToolEntry] {
  return [name, { tool: { name, description, inputSchema: jsonSchemaOf(schema), annotations: { title, openWorldHint: false, ...hints } }, call: (args, ctx) => call(parseArgs(schema, args, name), ctx) }];
}

export function repairTools(): [string, ToolEntry][] {
  return [
    tool("rerun_instance", "Rerun an instance", "Starts a new instance of a finished (completed, failed, cancelled) instance's workflow with its input, or with `input` when given, linked to it by rerunOf.", z.object({ instance_id: id, input: z.unknown().optional(), request_id: requestId }).strict(), { destructiveHint: false, idempotentHint: true }, async (a, ctx) => {
      await exposedInstance(ctx, a.instance_id);
      const r = await ctx.engine.rerun(a.instance_id, { ...(a.request_id ? { requestId: a.request_id } : {}), ...("input" in a ? { input: { value: a.input } } : {}) }, ctx.scope);
      return jsonResult({ instance_id: r.instanceId, status: r.status, created: r.created, rerun_of: a.instance_id });
    }),
    tool("fork_instance", "Fork an instance from a step", "Starts a new instance from an instance's history before the activity `from_activity_id` (as the history shows it, e.g. ship_order:1): results before it are reused, that activity and everything after it run again with the deployed code; a per-wait webhook that history created gets the fork's own URL, listed in `webhooks`. Refused when that history does not replay with the deployed code.", z.object({ instance_id: id, from_activity_id: z.string().min(1).max(255), request_id: requestId }).strict(), { destructiveHint: false, idempotentHint: true }, async (a, ctx) => {
      await exposedInstance(ctx, a.instance_id);
      const r = await ctx.engine.fork(a.instance_id, { fromActivityId: a.from_activity_id, ...(a.request_id ? { requestId: a.request_id } : {}) }, ctx.scope);
      // A per-wait webhook the copied history created gets the fork's own URL; this is the one place it is shown.
      return jsonResult({ instance_id: r.instanceId, status: r.status, created: r.created, fork_of: a.instance_id, copied_events: r.copiedEvents, webhooks: r.webhooks.map((h) => ({ id: h.id, url: h.url, status: h.status, expires_at: h.expiresAt })) });
    }),
    tool("bulk_instances", "Bulk action by filter", "Cancels, resumes or reruns every instance of a workflow matching the filter, as a durable operation (batched, resumable, once per instance); dry_run only counts them. Follow it with operation_status.", z.object({ workflow: z.string().min(1).max(255), status: z.array(z.enum(INSTANCE_STATUSES)).min(1).optional(), search: z.string().min(1).max(200).optional(), action: z.enum(["cancel", "resume", "rerun"]), dry_run: z.boolean().optional(), request_id: requestId }).strict(), { destructiveHint: true, idempotentHint: true }, async (a, ctx) => {
      exposedWorkflow(ctx, a.workflow);
      const filter = { workflowName: a.workflow, ...(a.status ? { status: a.status } : {}), ...(a.search ? { search: a.search } : {}) };
      if (a.dry_run) return jsonResult({ dry_run: true, count: await ctx.engine.countMatching(filter) });
      const r = await ctx.engine.startBulk({ filter, action: a.action, ...(a.request_id ? { requestId: a.request_id } : {}) }, {}, ctx.scope);
      return jsonResult({ ...bulkView(r.operation) });
    }),
    tool("operation_status", "Bulk operation progress", "A bulk operation's progress: total, done, skipped, failed, and its status.", z.object({ operation_id: z.string().min(1).max(255) }).strict(), { readOnlyHint: true }, async (a, ctx) => {
      const op = await ctx.engine.bulkOperation(a.operation_id);
      if (!op || (op.filter.workflowName !== undefined && !ctx.exposed.has(op.filter.workflowName))) throw new NotFoundError(`operation "${a.operation_id}" not found`);
      return jsonResult({ ...bulkView(op) });
    }),
    ...(["pause", "resume", "trigger"] as const).map((action) =>
      tool(`${action}_schedule`, `${action[0]!.toUpperCase()}${action.slice(1)} a schedule`, action === "pause" ? "Pauses a scheduled workflow: no tick starts until it is resumed." : action === "resume" ? "Resumes a paused schedule from its next tick after now (ticks missed while paused are not started)." : "Starts one instance of a scheduled workflow now, paused or not.", z.object({ workflow: z.string().min(1).max(255), ...(action === "trigger" ? { request_id: requestId } : {}) }).strict(), { idempotentHint: action !== "trigger" || undefined, destructiveHint: false }, async (a, ctx) => {
        exposedWorkflow(ctx, a.workflow);
        if (action === "trigger") {
          const r = await ctx.engine.triggerSchedule(a.workflow, (a as { request_id?: string }).request_id, ctx.scope);
          return jsonResult({ instance_id: r.instanceId, status: r.status, created: r.created });
        }
        const s = action === "pause" ? await ctx.engine.pauseSchedule(a.workflow) : await ctx.engine.resumeSchedule(a.workflow);
        return jsonResult({ workflow: s.workflowName, paused_at: s.pausedAt?.toISOString() ?? null, next_run_at: s.nextRunAt?.toISOString() ?? null });
      }),
    ),
  ];
}
