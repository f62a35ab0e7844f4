/**
 * `GET /schedules`: the app's scheduled workflows with their cron, time zone,
 * missed-tick policy, next run and last run (engine/schedules.ts). Reading it
 * registers the app's schedules first, so a fresh deployment lists its next
 * runs before the first sweep.
 */
import type { Hono } from "hono";
import * as z from "zod";
import type { ScheduleRecord } from "../engine/records.ts";
import type { RouteHelpers } from "./routes.ts";
import { documented } from "./openapi.ts";

export const scheduleView = z.object({
  workflow: z.string(),
  cron: z.string(),
  timezone: z.string(),
  missed: z.enum(["skip", "latest"]),
  nextRunAt: z.string().nullable().describe("the next tick (ISO 8601); null when the pattern never fires again"),
  lastRunAt: z.string().nullable().describe("the last tick an instance was started for"),
  lastInstanceId: z.string().nullable(),
  pausedAt: z.string().nullable().describe("when an operator paused it (POST /schedules/{workflow}/pause); null while it ticks"),
});

const iso = (d: Date | null) => (d ? d.toISOString() : null);
export const toScheduleView = (r: ScheduleRecord): z.output<typeof scheduleView> => ({
  workflow: r.workflowName,
  cron: r.cron,
  timezone: r.timezone,
  missed: r.missed,
  nextRunAt: iso(r.nextRunAt),
  lastRunAt: iso(r.lastRunAt),
  lastInstanceId: r.lastInstanceId,
  pausedAt: iso(r.pausedAt),
});

export function scheduleRoutes(api: Hono, h: RouteHelpers): void {
  api.get(
    "/schedules",
    documented({
      operationId: "listSchedules",
      summary: "List scheduled workflows with their next and last run",
      tags: ["workflows"],
      auth: "api",
      responses: { 200: { description: "the schedules of the app's workflows", schema: z.object({ schedules: z.array(scheduleView) }) } },
    }),
    async (c) => {
      const e = await h.engine(c);
      return c.json({ schedules: (await e.listSchedules()).map(toScheduleView) });
    },
  );
}
