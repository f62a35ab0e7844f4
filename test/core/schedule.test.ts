// Schedule definitions and the sweep's tick planning (core/schedule.ts), with
// no database: a cron of 5 or 6 fields in a time zone, refused when written
// (a TypeError naming the workflow), the tick a late sweep starts under each
// missed-tick policy, and the instance id of a tick. An app whose scheduled
// workflow cannot take { scheduledAt } is refused before any database is
// opened. Moved from test/engine/schedules.test.ts, which keeps the sweeps of
// several engines on real Postgres.
import { z } from "zod";
import { describe, expect, it } from "vitest";
import { createEdda } from "../../src/edda.ts";
import { workflow } from "../../src/index.ts";
import { normalizeSchedule, planDueTick, scheduledInstanceId } from "../../src/core/schedule.ts";

describe("schedule definitions", () => {
  it("5 and 6 fields, time zones; bad patterns, zones and policies are TypeErrors naming the workflow", () => {
    expect(normalizeSchedule("w", "0 9 * * *")).toEqual({ cron: "0 9 * * *", timezone: "UTC", missed: "latest", graceSeconds: 120 });
    expect(normalizeSchedule("w", { cron: "*/10 * * * * *", timezone: "Asia/Tokyo", missed: "skip" }).missed).toBe("skip");
    expect(() => workflow("bad_cron", { schedule: "every day" }, async () => 1)).toThrow(/bad_cron: invalid schedule/);
    expect(() => normalizeSchedule("w", "0 0 9 * * * 2030")).toThrow(/invalid schedule/);
    expect(() => normalizeSchedule("w", { cron: "0 9 * * *", timezone: "Mars/Base" })).toThrow(/invalid schedule/);
    expect(() => normalizeSchedule("w", { cron: "0 9 * * *", missed: "all" as never })).toThrow(/missed/);
  });

  it("a late sweep: latest starts the last tick that passed; skip starts it only within the grace", () => {
    const s = normalizeSchedule("w", "0 9 * * *");
    const now = new Date("2026-11-30T15:00:00Z");
    expect(planDueTick(s, now)).toEqual({ run: new Date("2026-11-30T09:00:00Z"), next: new Date("2026-12-01T09:00:00Z") });
    expect(planDueTick({ ...s, missed: "skip" }, now).run).toBeNull();
    expect(planDueTick({ ...s, missed: "skip" }, new Date("2026-11-30T09:01:00Z")).run).toEqual(new Date("2026-11-30T09:00:00Z"));
    expect(scheduledInstanceId("w", new Date("2026-11-30T09:00:00Z"))).toBe("schedule:w:2026-11-30T09:00:00.000Z");
  });

  it("a sweep within the tick's own second starts that tick, not the one before", () => {
    const s = normalizeSchedule("w", "0 * * * *");
    for (const at of ["2026-11-30T09:00:00.000Z", "2026-11-30T09:00:00.400Z", "2026-11-30T09:00:00.999Z"]) {
      expect(planDueTick(s, new Date(at))).toEqual({ run: new Date("2026-11-30T09:00:00Z"), next: new Date("2026-11-30T10:00:00Z") });
    }
    expect(planDueTick(s, new Date("2026-11-30T08:59:59.999Z")).run).toEqual(new Date("2026-11-30T08:00:00Z"));
  });

  it("a scheduled workflow whose input schema refuses { scheduledAt } is refused when the app is built", () => {
    const strict = workflow("sch_strict", { schedule: "0 9 * * *", input: z.object({ orderId: z.string() }) }, async () => 1);
    expect(() => createEdda({ workflows: [strict], database: { db: null, close: async () => {} } as never, secret: "s" })).toThrow(/sch_strict.*scheduledAt/);
  });
});
