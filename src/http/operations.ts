/**
 * Operator routes beside the instance view: the history paged with a cursor
 * (bounded work per request, however long a run's history grows) and the
 * resume of a quarantined instance (poison isolation set it aside; cancel is
 * the other way out, `POST /instances/:id/cancel`).
 */
import type { Hono } from "hono";
import { z } from "zod";
import { HISTORY_PAGE_MAX } from "../engine/engine.ts";
import type { RouteHelpers } from "./app.ts";
import { documented } from "./openapi.ts";
import { problem } from "./problem.ts";
import { historyEntry, instanceStatus } from "./schemas.ts";

const idParam = z.object({ id: z.string().describe("instance id") });

export function operationRoutes(api: Hono, h: RouteHelpers): void {
  api.get(
    "/instances/:id/history",
    documented({
      operationId: "instanceHistory",
      summary: "One page of an instance's history, oldest first",
      description: `At most ${HISTORY_PAGE_MAX} entries per page (default 100); pass \`nextCursor\` as \`after\` for the next page. The current run only (archived \`recur\` runs are in the viewer).`,
      tags: ["instances"],
      auth: "api",
      params: idParam,
      query: z.object({
        after: z.string().regex(/^\d{1,15}$/).optional().describe("nextCursor of the previous page"),
        limit: z.coerce.number().int().min(1).max(HISTORY_PAGE_MAX).optional().describe(`page size, at most ${HISTORY_PAGE_MAX} (default 100)`),
      }),
      responses: {
        200: { description: "a page of history", schema: z.object({ history: z.array(historyEntry), nextCursor: z.string().nullable() }) },
        404: { description: "unknown instance" },
      },
    }),
    async (c) => {
      const { params, query } = c.var.valid;
      const e = await h.engine(c);
      if (!(await e.storage.getInstance(params.id))) return problem(c, 404, `instance "${params.id}" not found`, "NotFoundError");
      return c.json(await e.historyPage(params.id, { ...(query.after ? { after: query.after } : {}), ...(query.limit ? { limit: query.limit } : {}) }));
    },
  );

  api.post(
    "/instances/:id/resume",
    documented({
      operationId: "resumeInstance",
      summary: "Retry a quarantined instance",
      description:
        "An instance whose steps (or a sweep task's work on it) failed too many times in a row is `quarantined` with the failure in its view. Resuming puts it back in the status it had (its timers and waits were kept) with the failure count reset; if it fails again as many times, it is quarantined again. Cancelling is the other way out.",
      tags: ["instances"],
      auth: "api",
      params: idParam,
      responses: {
        200: { description: "resumed: the status it is back in", schema: z.object({ status: instanceStatus }) },
        404: { description: "unknown instance" },
        409: { description: "the instance is not quarantined" },
      },
    }),
    async (c) => {
      const e = await h.engine(c);
      return c.json(await e.resume(c.var.valid.params.id, h.scope(c)));
    },
  );
}
