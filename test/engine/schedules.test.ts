// Schedules: one instance per cron tick, exactly once across several engines
// sweeping at once on real Postgres; the missed-tick policies; GET /schedules
// and the typed client; schedule definitions checked when they are written.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "../../src/client/index.ts";
import { createEdda } from "../../src/edda.ts";
import { workflow } from "../../src/index.ts";
import { normalizeSchedule, planDueTick, scheduledInstanceId } from "../../src/core/schedule.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const everySecond = workflow("sch_every_second", { schedule: "* * * * * *", input: z.object({ scheduledAt: z.iso.datetime() }) }, async (_ctx, input) => input.scheduledAt);
const latest = workflow("sch_latest", { schedule: { cron: "*/5 * * * *", timezone: "Europe/Berlin", missed: "latest" } }, async () => "ran");
const skip = workflow("sch_skip", { schedule: { cron: "*/5 * * * *", missed: "skip", graceSeconds: 0 } }, async () => "ran");

describe("schedule definitions (pure)", () => {
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

describe("schedules on real Postgres with several engines", () => {
  const apps: TestApp[] = [];
  beforeAll(async () => {
    const pg = await freshPostgres("schedules_engines");
    for (let i = 0; i < 3; i++) apps.push(makeTestApp(pg.open(), { workflows: [everySecond, latest, skip] }));
  });
  afterAll(async () => {
    for (const a of apps) await a.edda.close();
  });
  const db = () => apps[0]!.database.db;

  it("three engines sweeping at once for 3 s: each tick of a 6-field schedule starts exactly one instance", async () => {
    let started = 0;
    const until = Date.now() + 3000;
    await Promise.all(
      apps.map(async (a) => {
        while (Date.now() < until) {
          const rep = await a.edda.sweep();
          if (rep.failures.length) console.log(JSON.stringify(rep.failures));
          started += rep.scheduledStarted;
          await new Promise((r) => setTimeout(r, 40));
        }
      }),
    );
    const rows = await queryRows<{ instance_id: string; input_data: string }>(db(), sql`SELECT instance_id, input_data FROM workflow_instances WHERE workflow_name = 'sch_every_second' ORDER BY instance_id`);
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(started).toBe(rows.length); // no sweep counted an instance another sweep started
    const ticks = rows.map((r) => (JSON.parse(r.input_data) as { scheduledAt: string }).scheduledAt);
    expect(rows.map((r) => r.instance_id)).toEqual(ticks.map((t) => `schedule:sch_every_second:${t}`));
    for (const t of ticks) expect(new Date(t).getMilliseconds()).toBe(0);
    for (const r of rows) expect((await apps[0]!.waitFor(r.instance_id)).status).toBe("completed");
  });

  it("down for an hour: latest starts one instance for the last tick; skip (grace 0) starts none; both move to the next tick", async () => {
    await apps[0]!.edda.sweep(); // registers the rows
    await db().execute(sql`UPDATE workflow_schedules SET next_run_at = now() - interval '1 hour' WHERE workflow_name IN ('sch_latest', 'sch_skip')`);
    const reports = await Promise.all(apps.map((a) => a.edda.sweep()));
    const count = async (name: string) => (await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = ${name}`))[0]!.n;
    expect(await count("sch_latest")).toBe(1);
    expect(await count("sch_skip")).toBe(0);
    expect(reports.every((r) => r.failures.length === 0)).toBe(true);
    const client = createClient({ baseUrl: "http://localhost", fetch: (input, init) => Promise.resolve(apps[1]!.edda.app.request(input as string, init)) });
    const schedules = await client.schedules();
    expect(schedules.map((s) => s.workflow)).toEqual(["sch_every_second", "sch_latest", "sch_skip"]);
    const l = schedules.find((s) => s.workflow === "sch_latest")!;
    expect(l).toMatchObject({ cron: "*/5 * * * *", timezone: "Europe/Berlin", missed: "latest" });
    expect(new Date(l.nextRunAt!).getTime()).toBeGreaterThan(Date.now());
    expect(new Date(l.lastRunAt!).getTime() % (5 * 60_000)).toBe(0);
    expect(l.lastInstanceId).toBe(`schedule:sch_latest:${l.lastRunAt}`);
    const s = schedules.find((x) => x.workflow === "sch_skip")!;
    expect(s.lastRunAt).toBeNull();
    expect(new Date(s.nextRunAt!).getTime()).toBeGreaterThan(Date.now());
  });
});
