/**
 * The MCP repair tools: rerun an instance (or fork it from a step), a bulk
 * action by filter (with a dry run) and its progress, and schedule control.
 * Only exposed workflows: a bulk action names one, and an instance of another
 * does not exist for MCP clients.
 */
import * as z from "zod";
import { NotFoundError } from "../../core/errors.ts";
import { INSTANCE_STATUSES } from "../../core/model.ts";
import { bulkView } from "../../engine/bulk.ts";
import { exposedInstance, instanceId, tool, type McpCallContext, type ToolEntry } from "./tool-kit.ts";
import { jsonResult } from "./views.ts";

const requestId = z.string().regex(/^[A-Za-z0-9_.:-]{1,100}$/).optional().describe("idempotency: the same request id returns what the first call made");

/** One status or several (any of which matches), as the HTTP list's `?status=` takes them. */
export const statusFilter = z
  .union([z.enum(INSTANCE_STATUSES), z.array(z.enum(INSTANCE_STATUSES)).min(1).max(INSTANCE_STATUSES.length)])
  .transform((s) => (typeof s === "string" ? [s] : s))
  .optional()
  .describe("one status or a list of them (any of which matches)");

function exposedWorkflow(ctx: McpCallContext, name: string): void {
  if (!ctx.exposed.has(name)) throw new NotFoundError(`unknown workflow "${name}"`);
}

const rerunArgs = z
  .object({
    instance_id: instanceId,
    from_activity_id: z.string().min(1).max(255).optional().describe("fork: start from the history before this activity (as the history shows it, e.g. ship_order:1) instead of from the top"),
    input: z.unknown().optional().describe("a new input (a plain rerun only)"),
    request_id: requestId,
  })
  .strict()
  .refine((a) => a.from_activity_id === undefined || !("input" in a), { message: "a fork reuses the instance's input: pass either from_activity_id or input", path: ["input"] });

export function repairTools(): [string, ToolEntry][] {
  return [
    tool("rerun_instance", "Rerun or fork an instance", "Starts a new instance of a finished (completed, failed, cancelled) instance's workflow with its input, or with `input` when given, linked to it by rerun_of. With from_activity_id it forks instead: the new instance reuses the history before that activity, and that activity and everything after it run again with the deployed code; a per-wait webhook that history created gets the fork's own URL, listed in `webhooks`. A fork is refused when that history does not replay with the deployed code.", rerunArgs, { destructiveHint: false, idempotentHint: true }, async (a, ctx) => {
      await exposedInstance(ctx, a.instance_id);
      const rid = a.request_id ? { requestId: a.request_id } : {};
      if (a.from_activity_id === undefined) {
        const r = await ctx.engine.rerun(a.instance_id, { ...rid, ...("input" in a ? { input: { value: a.input } } : {}) }, ctx.scope);
        return jsonResult({ instance_id: r.instanceId, status: r.status, created: r.created, rerun_of: a.instance_id });
      }
      const r = await ctx.engine.fork(a.instance_id, { fromActivityId: a.from_activity_id, ...rid }, ctx.scope);
      // A per-wait webhook the copied history created gets the fork's own URL; this is the one place it is shown.
      return jsonResult({ instance_id: r.instanceId, status: r.status, created: r.created, fork_of: a.instance_id, copied_events: r.copiedEvents, webhooks: r.webhooks.map((h) => ({ id: h.id, url: h.url, status: h.status, expires_at: h.expiresAt })) });
    }),
    tool("bulk_instances", "Bulk action by filter", "Cancels, resumes or reruns every instance of a workflow matching the filter, as a durable operation (batched, resumable, once per instance); dry_run only counts them. Follow it with operation_status.", z.object({ workflow: z.string().min(1).max(255), status: statusFilter, search: z.string().min(1).max(200).optional(), action: z.enum(["cancel", "resume", "rerun"]), dry_run: z.boolean().optional(), request_id: requestId }).strict(), { destructiveHint: true, idempotentHint: true }, async (a, ctx) => {
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
    tool("control_schedule", "Pause, resume or trigger a schedule", "pause: no tick of the scheduled workflow starts until it is resumed; resume: from its next tick after now (ticks missed while paused are not started); trigger: starts one instance now, paused or not (request_id makes it idempotent).", z.object({ workflow: z.string().min(1).max(255), action: z.enum(["pause", "resume", "trigger"]), request_id: requestId }).strict(), { destructiveHint: false }, async (a, ctx) => {
      exposedWorkflow(ctx, a.workflow);
      if (a.action === "trigger") {
        const r = await ctx.engine.triggerSchedule(a.workflow, a.request_id, ctx.scope);
        return jsonResult({ instance_id: r.instanceId, status: r.status, created: r.created });
      }
      const s = a.action === "pause" ? await ctx.engine.pauseSchedule(a.workflow) : await ctx.engine.resumeSchedule(a.workflow);
      return jsonResult({ workflow: s.workflowName, paused_at: s.pausedAt?.toISOString() ?? null, next_run_at: s.nextRunAt?.toISOString() ?? null });
    }),
  ];
}
