// Schedules: one instance per cron tick, exactly once across several engines
// sweeping at once on real Postgres; the missed-tick policies; GET /schedules
// and the typed client. The definitions and the tick planning, pure, are in
// test/core/schedule.test.ts.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "../../src/client/index.ts";
import { workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const everySecond = workflow("sch_every_second", { schedule: "* * * * * *", input: z.object({ scheduledAt: z.iso.datetime() }) }, async (_ctx, input) => input.scheduledAt);
const latest = workflow("sch_latest", { schedule: { cron: "*/5 * * * *", timezone: "Europe/Berlin", missed: "latest" } }, async () => "ran");
const skip = workflow("sch_skip", { schedule: { cron: "*/5 * * * *", missed: "skip", graceSeconds: 0 } }, async () => "ran");

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
