/**
 * Operator routes beside the instance view: the history paged with a cursor
 * (bounded work per request, however long a run's history grows), or all of
 * it streamed as NDJSON (history-export.ts), and the
 * resume of a quarantined instance (poison isolation set it aside; cancel is
 * the other way out, `POST /instances/:id/cancel`).
 */
import type { Hono } from "hono";
import * as z from "zod";
import type { DispatchScope } from "../engine/dispatcher.ts";
import { HISTORY_PAGE_MAX, type Engine } from "../engine/engine.ts";
import type { InstanceStatus } from "../core/model.ts";
import type { RouteHelpers } from "./routes.ts";
import { documented } from "./openapi.ts";
import { instanceNotFound } from "./problem.ts";
import { historyEntry, instanceIdParam, instanceStatus } from "./schemas.ts";
import { historyExport } from "./history-export.ts";

interface Transition {
  /** The path's last segment: `POST /instances/:id/{action}`. */
  action: string;
  operationId: string;
  summary: string;
  description?: string;
  /** What the 200 answer (the status the instance is now in) means. */
  ok: string;
  /** When the instance is in no status to take the action (409). */
  conflict: string;
  run: (e: Engine, instanceId: string, scope: DispatchScope | undefined) => Promise<{ status: InstanceStatus }>;
}

/**
 * A POST that moves one instance to another status (cancel, resume): the same
 * parameters, answers and handler shape, only the engine call differs. The
 * engine throws NotFoundError / ConflictError, which onError maps to 404 / 409.
 */
export function instanceTransition(api: Hono, h: RouteHelpers, t: Transition): void {
  api.post(
    `/instances/:id/${t.action}`,
    documented({
      operationId: t.operationId,
      summary: t.summary,
      ...(t.description ? { description: t.description } : {}),
      tags: ["instances"],
      auth: "api",
      params: instanceIdParam,
      responses: {
        200: { description: t.ok, schema: z.object({ status: instanceStatus }) },
        404: { description: "unknown instance" },
        409: { description: t.conflict },
      },
    }),
    async (c) => {
      const e = await h.engine(c);
      return c.json(await t.run(e, c.var.valid.params.id, h.scope(c)));
    },
  );
}

export function operationRoutes(api: Hono, h: RouteHelpers): void {
  api.get(
    "/instances/:id/history",
    documented({
      operationId: "instanceHistory",
      summary: "One page of an instance's history, oldest first",
      description: `At most ${HISTORY_PAGE_MAX} entries per page (default 100); pass \`nextCursor\` as \`after\` for the next page. The current run only (archived \`recur\` runs are in the viewer).`,
      tags: ["instances"],
      auth: "api",
      params: instanceIdParam,
      query: z.object({
        after: z.string().regex(/^\d{1,15}$/).optional().describe("nextCursor of the previous page"),
        limit: z.coerce.number().int().min(1).max(HISTORY_PAGE_MAX).optional().describe(`page size, at most ${HISTORY_PAGE_MAX} (default 100)`),
        format: z.enum(["json", "ndjson"]).optional().describe("ndjson: the whole history (every page), streamed as one entry per line; `after` and `limit` do not apply"),
      }),
      responses: {
        200: { description: "a page of history (or, with format=ndjson, all of it as application/x-ndjson: one history entry per line)", schema: z.object({ history: z.array(historyEntry), nextCursor: z.string().nullable() }) },
        404: { description: "unknown instance" },
      },
    }),
    async (c) => {
      const { params, query } = c.var.valid;
      const e = await h.engine(c);
      if (!(await e.instanceExists(params.id))) return instanceNotFound(c, params.id);
      if (query.format === "ndjson") return historyExport(c, e, params.id, "ndjson", h.scope(c));
      return c.json(await e.historyPage(params.id, { ...(query.after ? { after: query.after } : {}), ...(query.limit ? { limit: query.limit } : {}) }));
    },
  );

  instanceTransition(api, h, {
    action: "resume",
    operationId: "resumeInstance",
    summary: "Retry a quarantined instance",
    description:
      "An instance whose steps (or a sweep task's work on it) failed too many times in a row is `quarantined` with the failure in its view. Resuming puts it back in the status it had (its timers and waits were kept) with the failure count reset; if it fails again as many times, it is quarantined again. Cancelling is the other way out.",
    ok: "resumed: the status it is back in",
    conflict: "the instance is not quarantined",
    run: (e, id, scope) => e.resume(id, scope),
  });
}
