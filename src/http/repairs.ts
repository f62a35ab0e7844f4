/**
 * Repair routes (engine/repairs.ts, engine/bulk.ts, engine/schedules.ts):
 * rerun and fork one instance, bulk actions by filter as a durable operation
 * with its progress, and schedule control (pause, resume, trigger now).
 */
import type { Context, Hono } from "hono";
import * as z from "zod";
import { BULK_ACTIONS, bulkView, type BulkOperationView } from "../engine/bulk.ts";
import type { DispatchScope } from "../engine/dispatcher.ts";
import type { Engine } from "../engine/engine.ts";
import type { Repaired } from "../engine/repairs.ts";
import { INSTANCE_STATUSES, type InstanceStatus } from "../core/model.ts";
import type { RouteHelpers } from "./routes.ts";
import { documented, type Validated } from "./openapi.ts";
import { problem } from "./problem.ts";
import { instanceIdParam, instanceStatus } from "./schemas.ts";
import { scheduleView, toScheduleView } from "./schedules.ts";

const requestId = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,100}$/)
  .optional()
  .describe("idempotency: the same request id returns what the first request made (200) instead of making another");

const repaired = z.object({ instanceId: z.string(), status: instanceStatus });
const forked = repaired.extend({
  copiedEvents: z.number().int(),
  webhooks: z
    .array(
      z.object({
        id: z.string().describe("the hook's operation id, e.g. webhook:1"),
        url: z.string().describe("the fork's own URL for it (absolute with EDDA_PUBLIC_URL, else the path)"),
        status: z.enum(["open", "fired", "expired", "cancelled"]).describe("open: the fork's wait on it is still to come"),
        expiresAt: z.string().nullable(),
      }),
    )
    .describe("the per-wait webhooks the copied prefix created, under the fork's URLs"),
});

const statuses = z.array(z.enum(INSTANCE_STATUSES)).min(1).max(INSTANCE_STATUSES.length);

/** A bulk operation's filter as stored and shown: `status` always a list. */
const bulkFilterView = z
  .object({
    workflow: z.string().min(1).max(255).optional(),
    status: statuses.optional(),
    startedAfter: z.iso.datetime({ offset: true }).optional(),
    startedBefore: z.iso.datetime({ offset: true }).optional(),
    search: z.string().min(1).max(200).optional().describe("literal text in the instance id or the input JSON"),
    deployment: z.string().min(1).max(255).optional().describe("instances on this deployment (GET /deployments)"),
  })
  .strict();

/** The filter a request sends: `status` one value or several, as the list's `?status=` takes it. */
export const bulkFilter = bulkFilterView.extend({
  status: z
    .union([z.enum(INSTANCE_STATUSES), statuses])
    .transform((s) => (typeof s === "string" ? [s] : s))
    .optional()
    .describe("one status or a list of them (any of which matches)"),
});

const operationView = z.object({
  operationId: z.string(),
  action: z.enum(BULK_ACTIONS),
  filter: bulkFilterView,
  status: z.enum(["running", "completed"]),
  total: z.number().int().describe("instances the filter matched when the operation was created"),
  done: z.number().int().describe("instances the action was applied to"),
  skipped: z.number().int().describe("matched, but no longer in a status the action applies to when its batch reached them"),
  failed: z.number().int(),
  errors: z.array(z.object({ instanceId: z.string(), error: z.string() })).describe("the latest failures (at most 20)"),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});

const workflowParam = z.object({ workflow: z.string().min(1).max(255).describe("a scheduled workflow") });

/** The request id a body carries, as the engine's options take it (none when it carries none). */
const requestIdOf = (body: { requestId?: string | undefined }): { requestId?: string } => (body.requestId ? { requestId: body.requestId } : {});

/** The instance a start-like route made: 201 when this request made it, 200 when its request id already had. */
const madeOrFound = (c: Context, r: Repaired, extra: object = {}) => c.json({ instanceId: r.instanceId, status: r.status, ...extra }, r.created ? 201 : 200);

interface RepairRoute<B extends z.ZodType, R extends Repaired> {
  action: "rerun" | "fork";
  doc: { operationId: string; summary: string; description?: string };
  body: B;
  /** The answer's schema (default: the new instance's id and status) and what it carries besides them. */
  answer?: z.ZodType;
  extra?: (r: R) => object;
  /** Why the engine refuses it, besides an unknown instance (404). */
  refused: { 409: string; 422: string };
  run: (e: Engine, instanceId: string, body: Validated<typeof instanceIdParam, undefined, B>["body"], scope: DispatchScope | undefined) => Promise<R>;
}

/**
 * Rerun and fork share one shape: `POST /instances/:id/<action>` makes a new
 * instance from `:id` (idempotent per request id, like every start); only the
 * body, the engine call, the answer's extras and the reasons for a refusal differ.
 */
function repairRoute<B extends z.ZodType, R extends Repaired>(api: Hono, h: RouteHelpers, route: RepairRoute<B, R>): void {
  const made = route.answer ?? repaired;
  api.post(
    `/instances/:id/${route.action}`,
    documented({
      ...route.doc,
      tags: ["instances"],
      auth: "api",
      params: instanceIdParam,
      body: route.body,
      responses: {
        201: { description: `the ${route.action}, started`, schema: made },
        200: { description: `the ${route.action} this request id already started`, schema: made },
        404: { description: "unknown instance" },
        409: { description: route.refused[409] },
        422: { description: route.refused[422] },
      },
    }),
    async (c) => {
      const { params, body } = c.var.valid;
      const r = await route.run(await h.engine(c), params.id, body, h.scope(c));
      return madeOrFound(c, r, route.extra?.(r));
    },
  );
}

export function repairRoutes(api: Hono, h: RouteHelpers): void {
  repairRoute(api, h, {
    action: "rerun",
    doc: { operationId: "rerunInstance", summary: "Start a new instance of a finished instance's workflow with its input (or a new one), linked by rerunOf" },
    body: z.object({ input: z.unknown().optional().describe("a new input (checked against the workflow's schema); default: the original's"), requestId }),
    refused: { 409: "the instance has not finished", 422: "the input does not match the deployed schema, or the workflow is not deployed" },
    run: (e, id, body, scope) => e.rerun(id, { ...requestIdOf(body), ...("input" in body ? { input: { value: body.input } } : {}) }, scope),
  });

  repairRoute(api, h, {
    action: "fork",
    doc: {
      operationId: "forkInstance",
      summary: "Start a new instance from an instance's history before one of its activities: results before it are reused, the rest runs with the deployed code",
      description:
        "The new instance (linked by `forkOf`) gets the original's input and its current-run history before the first event at `fromActivityId`; it resumes there. Activities before the fork point do not run again (their recorded results replay), so their effects — transactional ones included — are not repeated; everything from the fork point on runs again, and non-transactional side effects there (HTTP calls, e-mails) happen again. Refused with 409 when the prefix does not replay with the deployed code (the verify-replay check) or the instance is still live. A per-wait webhook the prefix created (createWebhook) gets the fork's own URL (the token is derived from the instance, so the original's URL never reaches the fork): `webhooks` lists them — this response is the one place they are shown, since the mail that carried the original's link is in the prefix and is not sent again. Each keeps the original's expiry; fork from the creation itself for a fresh link.",
    },
    body: z.object({ fromActivityId: z.string().min(1).max(255).describe('an activity id as the history shows it, e.g. "ship_order:1"'), requestId }),
    refused: { 409: "the prefix does not replay with the deployed code, or the instance is not finished, parked or quarantined", 422: "no such activity in the instance's history, or its workflow is not deployed" },
    run: (e, id, body, scope) => e.fork(id, { fromActivityId: body.fromActivityId, ...requestIdOf(body) }, scope),
    answer: forked,
    extra: (r) => ({ copiedEvents: r.copiedEvents, webhooks: r.webhooks }),
  });

  api.post(
    "/instances/bulk",
    documented({
      operationId: "bulkInstances",
      summary: "Cancel, resume, rerun or upgrade every instance a filter matches, as a durable operation (or count them: dryRun)",
      description:
        "The operation runs in batches (each one transaction, at most `batchSize` instances), in this request's background work and then the sweep's, resumable after a crash and applied once per instance. Instances started after the operation was created are not matched. `total` is the number matched at creation while it runs; once completed it is done + skipped + failed, the instances this operation took: one that another operation (or the instance itself) moved out of the filter first is that one's, so operations racing over the same instances count each exactly once between them. The same `requestId` again with the same action and filter returns the operation (200); with another action or filter it is 409 naming it. Progress: `GET /operations/{id}`.",
      tags: ["instances"],
      auth: "api",
      body: z.object({
        filter: bulkFilter,
        action: z.enum(BULK_ACTIONS).describe("upgrade: move each unfinished instance to this deployment when its history replays with this code (those that do not fail, with the mismatch)"),
        dryRun: z.boolean().optional().describe("only count the matching instances"),
        requestId,
      }),
      responses: {
        200: { description: "dry run: how many instances match now; or the operation this request id already created", schema: z.union([z.object({ dryRun: z.literal(true), count: z.number().int() }), operationView]) },
        202: { description: "the operation, created and running", schema: operationView },
        409: { description: "this requestId already names an operation with another action or filter (the problem names it)" },
      },
    }),
    async (c) => {
      const { body } = c.var.valid;
      const e = await h.engine(c);
      const f = body.filter;
      const filter = {
        ...(f.workflow ? { workflowName: f.workflow } : {}),
        ...(f.status ? { status: f.status as InstanceStatus[] } : {}),
        ...(f.startedAfter ? { startedAfter: new Date(f.startedAfter) } : {}),
        ...(f.startedBefore ? { startedBefore: new Date(f.startedBefore) } : {}),
        ...(f.search ? { search: f.search } : {}),
        ...(f.deployment ? { deployment: f.deployment } : {}),
      };
      if (body.dryRun) return c.json({ dryRun: true, count: await e.countMatching(filter) });
      const r = await e.startBulk({ filter, action: body.action, ...requestIdOf(body) }, {}, h.scope(c));
      return c.json(bulkView(r.operation), r.created ? 202 : 200);
    },
  );

  api.get(
    "/operations",
    documented({
      operationId: "listOperations",
      summary: "Bulk operations, newest first",
      tags: ["instances"],
      auth: "api",
      query: z.object({ limit: z.coerce.number().int().min(1).max(100).optional().describe("at most 100 (default 20)") }),
      responses: { 200: { description: "the latest operations", schema: z.object({ operations: z.array(operationView) }) } },
    }),
    async (c) => {
      const e = await h.engine(c);
      const ops = await e.listBulkOperations(c.var.valid.query.limit ?? 20);
      return c.json({ operations: ops.map(bulkView) satisfies BulkOperationView[] });
    },
  );

  api.get(
    "/operations/:id",
    documented({
      operationId: "getOperation",
      summary: "A bulk operation's progress: total, done, skipped, failed",
      tags: ["instances"],
      auth: "api",
      params: z.object({ id: z.string().min(1).max(255) }),
      responses: { 200: { description: "the operation", schema: operationView }, 404: { description: "unknown operation" } },
    }),
    async (c) => {
      const e = await h.engine(c);
      const op = await e.bulkOperation(c.var.valid.params.id);
      if (!op) return problem(c, 404, `operation "${c.var.valid.params.id}" not found`, "NotFoundError");
      return c.json(bulkView(op));
    },
  );

  for (const [action, summary] of [
    ["pause", "Pause a schedule: no sweep starts a tick of it until it is resumed"],
    ["resume", "Resume a paused schedule from its next tick after now (ticks missed while paused are not started)"],
  ] as const) {
    api.post(
      `/schedules/:workflow/${action}`,
      documented({
        operationId: `${action}Schedule`,
        summary,
        tags: ["workflows"],
        auth: "api",
        params: workflowParam,
        responses: { 200: { description: "the schedule now", schema: scheduleView }, 404: { description: "no scheduled workflow of this name" } },
      }),
      async (c) => {
        const e = await h.engine(c);
        const name = c.var.valid.params.workflow;
        return c.json(toScheduleView(action === "pause" ? await e.pauseSchedule(name) : await e.resumeSchedule(name)));
      },
    );
  }

  api.post(
    "/schedules/:workflow/trigger",
    documented({
      operationId: "triggerSchedule",
      summary: "Start one instance of a scheduled workflow now ({ scheduledAt: now }), paused or not",
      tags: ["workflows"],
      auth: "api",
      params: workflowParam,
      body: z.object({ requestId }),
      responses: {
        201: { description: "started", schema: repaired },
        200: { description: "the instance this request id already started", schema: repaired },
        404: { description: "no scheduled workflow of this name" },
      },
    }),
    async (c) => {
      const e = await h.engine(c);
      return madeOrFound(c, await e.triggerSchedule(c.var.valid.params.workflow, c.var.valid.body.requestId, h.scope(c)));
    },
  );
}
