// Repairs on real Postgres with several engines: rerun (linked, idempotent per
// request id), fork from a step (the prefix's activity bodies do not run again;
// refused when the prefix does not replay with the deployed code), schedule
// control (a paused schedule swept by three engines does not tick; trigger-now
// starts exactly one), and priority ordering a concurrency key's queue under
// 50 racing starts.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, TerminalError, waitMessage, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const runs = { a: 0, b: 0, c: 0 };
let cDown = true;
const stepA = activity("rp_a", async () => (runs.a++, "a"));
const stepB = activity("rp_b", async () => (runs.b++, "b"));
const stepC = activity("rp_c", async () => {
  runs.c++;
  if (cDown) throw new TerminalError("partner API down");
  return "c";
});
const ship = workflow("rp_ship", { input: z.object({ order: z.string() }) }, async (ctx, input) => {
  const a = await stepA(ctx);
  const b = await stepB(ctx);
  const c = await stepC(ctx);
  return `${a}${b}${c}:${input.order}`;
});
// The same workflow name with other code: its history does not replay here.
const shipChanged = workflow("rp_ship", { input: z.object({ order: z.string() }) }, async (ctx, input) => {
  const b = await stepB(ctx);
  const a = await stepA(ctx);
  return `${b}${a}:${input.order}`;
});
const waiter = workflow("rp_wait", async (ctx) => waitMessage(ctx, "rp-go"));
const tick = workflow("rp_tick", { schedule: "* * * * * *" }, async () => "ticked");
const mark = activity("rp_mark", async (ctx) => {
  await ctx.tx.execute(sql`INSERT INTO rp_log (instance_id, at) VALUES (${ctx.instanceId}, clock_timestamp())`);
});
const prio = workflow("rp_prio", { input: z.object({ hold: z.boolean() }), concurrency: { key: () => "one", limit: 1 } }, async (ctx, input) => {
  if (input.hold) await waitMessage(ctx, "rp-release");
  else await mark(ctx);
});

const json = { "content-type": "application/json" };
const post = async (a: TestApp, path: string, body: unknown = {}): Promise<Response> => a.edda.app.request(path, { method: "POST", headers: json, body: JSON.stringify(body) });

describe("repairs on real Postgres with several engines", () => {
  const apps: TestApp[] = [];
  let changed: TestApp;
  beforeAll(async () => {
    const pg = await freshPostgres("repairs");
    for (let i = 0; i < 3; i++) apps.push(makeTestApp(pg.open(), { workflows: [ship, waiter, tick, prio] }));
    changed = makeTestApp(pg.open(), { workflows: [shipChanged] });
    await apps[0]!.database.db.execute(sql`CREATE TABLE rp_log (instance_id text, at timestamptz)`);
  });
  afterAll(async () => {
    for (const a of [...apps, changed]) {
      await a.edda.close();
      await a.database.close();
    }
  });
  const a0 = () => apps[0]!;
  const a1 = () => apps[1]!;
  const a2 = () => apps[2]!;
  const db = () => apps[0]!.database.db;

  it("rerun: a failed instance reruns with its input (or a new one), linked; the same request id from two engines makes one", async () => {
    cDown = true;
    const failed = await a0().edda.start(ship, { order: "o1" });
    expect((await a0().waitFor(failed.instanceId)).status).toBe("failed");
    cDown = false;
    const [r1, r2] = await Promise.all([post(a1(), `/instances/${failed.instanceId}/rerun`, { requestId: "fix-1" }), post(a2(), `/instances/${failed.instanceId}/rerun`, { requestId: "fix-1" })]);
    const bodies = [(await r1.json()) as { instanceId: string }, (await r2.json()) as { instanceId: string }];
    expect([r1.status, r2.status].sort()).toEqual([200, 201]);
    expect(bodies[0]!.instanceId).toBe(bodies[1]!.instanceId);
    const rerun = await a0().waitFor(bodies[0]!.instanceId);
    expect(rerun).toMatchObject({ status: "completed", output: "abc:o1", rerunOf: failed.instanceId, forkOf: null });
    const again = await post(a0(), `/instances/${failed.instanceId}/rerun`, { requestId: "fix-1" });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { instanceId: string }).instanceId).toBe(bodies[0]!.instanceId);
    const withInput = await post(a0(), `/instances/${failed.instanceId}/rerun`, { input: { order: "o2" } });
    expect(withInput.status).toBe(201);
    expect((await a0().waitFor(((await withInput.json()) as { instanceId: string }).instanceId)).output).toBe("abc:o2");
    const [rows] = await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances WHERE origin_instance_id = ${failed.instanceId}`);
    expect(rows!.n).toBe(2);
  });

  it("rerun refusals: an unfinished instance 409, unknown 404, a bad input or request id 422; nothing is created", async () => {
    const live = await a0().edda.start(waiter, null);
    await a0().waitFor(live.instanceId, ["waiting_for_message"]);
    const before = await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances`);
    expect((await post(a0(), `/instances/${live.instanceId}/rerun`)).status).toBe(409);
    expect((await post(a0(), "/instances/rp-nope/rerun")).status).toBe(404);
    const done = (await queryRows<{ instance_id: string }>(db(), sql`SELECT instance_id FROM workflow_instances WHERE workflow_name = 'rp_ship' LIMIT 1`))[0]!.instance_id;
    expect((await post(a0(), `/instances/${done}/rerun`, { input: { order: 7 } })).status).toBe(422);
    expect(await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances`)).toEqual(before);
    await post(a0(), `/instances/${live.instanceId}/messages`, { channel: "rp-go", data: 1 });
    expect((await a0().waitFor(live.instanceId)).status).toBe("completed");
  });

  it("fork from a step: the history before it is reused (a and b do not run again), c runs with the deployed code", async () => {
    cDown = true;
    const failed = await a0().edda.start(ship, { order: "f1" });
    const view = await a0().waitFor(failed.instanceId);
    expect(view.status).toBe("failed");
    const cId = view.history!.find((e) => e.activityId.startsWith("rp_c"))!.activityId;
    cDown = false;
    const before = { ...runs };
    const res = await post(a1(), `/instances/${failed.instanceId}/fork`, { fromActivityId: cId, requestId: "fork-1" });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { instanceId: string; copiedEvents: number };
    expect(body.copiedEvents).toBe(2);
    const forked = await a1().waitFor(body.instanceId);
    expect(forked).toMatchObject({ status: "completed", output: "abc:f1", forkOf: { instanceId: failed.instanceId, fromActivityId: cId }, rerunOf: null });
    expect(runs.a - before.a).toBe(0);
    expect(runs.b - before.b).toBe(0);
    expect(runs.c - before.c).toBe(1);
    // the same request id returns the same fork; a fork from the start runs everything again
    const again = await post(a2(), `/instances/${failed.instanceId}/fork`, { fromActivityId: cId, requestId: "fork-1" });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { instanceId: string }).instanceId).toBe(body.instanceId);
    const aId = view.history!.find((e) => e.activityId.startsWith("rp_a"))!.activityId;
    const full = (await (await post(a2(), `/instances/${failed.instanceId}/fork`, { fromActivityId: aId })).json()) as { instanceId: string; copiedEvents: number };
    expect(full.copiedEvents).toBe(0);
    expect((await a2().waitFor(full.instanceId)).status).toBe("completed");
    expect(runs.a - before.a).toBe(1);
  });

  it("fork refusals: a prefix that does not replay with the deployed code 409 (saying so), no such activity 422, a live instance 409", async () => {
    cDown = true;
    const failed = await a0().edda.start(ship, { order: "f2" });
    const view = await a0().waitFor(failed.instanceId);
    const cId = view.history!.find((e) => e.activityId.startsWith("rp_c"))!.activityId;
    const count = async () => (await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances`))[0]!.n;
    const n = await count();
    const diverged = await post(changed, `/instances/${failed.instanceId}/fork`, { fromActivityId: cId });
    expect(diverged.status).toBe(409);
    expect(((await diverged.json()) as { error: string }).error).toMatch(/does not replay with the deployed code/);
    expect((await post(a0(), `/instances/${failed.instanceId}/fork`, { fromActivityId: "rp_nothing:1" })).status).toBe(422);
    const live = await a0().edda.start(waiter, null);
    await a0().waitFor(live.instanceId, ["waiting_for_message"]);
    expect((await post(a0(), `/instances/${live.instanceId}/fork`, { fromActivityId: "x" })).status).toBe(409);
    expect(await count()).toBe(n + 1);
    // valid traffic still flows after the refusals
    await post(a0(), `/instances/${live.instanceId}/messages`, { channel: "rp-go", data: 2 });
    expect((await a0().waitFor(live.instanceId)).output).toMatchObject({ data: 2 });
    cDown = false;
  });

  it("schedule control: paused while three engines sweep, no tick starts; trigger-now starts exactly one; resume ticks again", async () => {
    const ticks = async () => (await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'rp_tick'`))[0]!.n;
    const sweepFor = (ms: number) => {
      const until = Date.now() + ms;
      return Promise.all(apps.map(async (a) => {
        while (Date.now() < until) {
          await a.edda.sweep();
          await new Promise((r) => setTimeout(r, 50));
        }
      }));
    };
    const running = sweepFor(4000);
    await new Promise((r) => setTimeout(r, 1500));
    const paused = await post(a0(), "/schedules/rp_tick/pause");
    expect(paused.status).toBe(200);
    expect(((await paused.json()) as { pausedAt: string | null }).pausedAt).not.toBeNull();
    const atPause = await ticks();
    await running;
    expect(await ticks()).toBe(atPause);
    await sweepFor(1500);
    expect(await ticks()).toBe(atPause);
    const [t1, t2] = await Promise.all([post(a1(), "/schedules/rp_tick/trigger", { requestId: "now-1" }), post(a2(), "/schedules/rp_tick/trigger", { requestId: "now-1" })]);
    expect([t1.status, t2.status].sort()).toEqual([200, 201]);
    expect(await ticks()).toBe(atPause + 1);
    const resumed = (await (await post(a0(), "/schedules/rp_tick/resume")).json()) as { pausedAt: string | null };
    expect(resumed.pausedAt).toBeNull();
    await sweepFor(2500);
    expect(await ticks()).toBeGreaterThan(atPause + 1);
    const list = (await (await a0().edda.app.request("/schedules")).json()) as { schedules: { workflow: string; pausedAt: string | null }[] };
    expect(list.schedules.find((s) => s.workflow === "rp_tick")!.pausedAt).toBeNull();
  }, 30_000);

  it("priority: 50 racing starts behind a held slot leave the queue by priority, then age", async () => {
    const holder = await a0().edda.start(prio, { hold: true });
    await a0().waitFor(holder.instanceId, ["waiting_for_message"]);
    const priorities = Array.from({ length: 50 }, (_, i) => (i * 7) % 5 - 2);
    const started = await Promise.all(priorities.map((priority, i) => post(apps[i % 3]!, "/workflows/rp_prio/instances", { input: { hold: false }, priority })));
    expect(started.every((r) => r.status === 201)).toBe(true);
    const expected = await queryRows<{ instance_id: string }>(db(), sql`SELECT instance_id FROM workflow_instances WHERE workflow_name = 'rp_prio' AND status = 'queued' ORDER BY priority DESC, started_at, instance_id`);
    expect(expected.length).toBe(50);
    await post(a0(), `/instances/${holder.instanceId}/messages`, { channel: "rp-release", data: null });
    for (const e of expected) await a0().waitFor(e.instance_id, ["completed"], 60_000);
    const log = await queryRows<{ instance_id: string }>(db(), sql`SELECT instance_id FROM rp_log ORDER BY at`);
    expect(log.map((r) => r.instance_id)).toEqual(expected.map((r) => r.instance_id));
    const view = await a0().edda.getInstance(expected[0]!.instance_id);
    expect(view!.priority).toBe(2);
    expect((await post(a0(), "/workflows/rp_prio/instances", { input: { hold: false }, priority: 1.5 })).status).toBe(422);
  }, 90_000);
});
