/**
 * Example: a schedule. One instance per tick — every day at 09:00 Berlin time —
 * started by the sweep (Workers cron trigger, Deno.cron, Node's interval
 * sweeper) under the id `schedule:daily_report:<tick>`, exactly once however
 * many sweeps run. After downtime only the latest missed tick runs.
 */
import * as z from "zod";
import { activity, workflow } from "../../src/index.ts";

const compile = activity("compile_report", async (_ctx, day: string) => ({ day, lines: 3 }));

export const dailyReport = workflow(
  "daily_report",
  {
    description: "Compiles the daily report; scheduled every day at 09:00 Europe/Berlin.",
    schedule: { cron: "0 9 * * *", timezone: "Europe/Berlin", missed: "latest" },
    input: z.object({ scheduledAt: z.iso.datetime() }),
  },
  async (ctx, { scheduledAt }) => compile(ctx, scheduledAt.slice(0, 10)),
);
