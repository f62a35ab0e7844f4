// Retention on real Postgres: the sweeper deletes finished instances (with
// history, attempt rows, compensations, archived recur runs), CloudEvent
// dedupe rows and channel messages once they are older than the configured
// retention, in bounded batches; young rows and unfinished instances stay,
// and an instance's archived runs stay visible until then. EDDA_RETENTION_DAYS
// as read from the environment: test/platform/env-settings.test.ts.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, registerCompensation, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

let t: TestApp;
const failedOnce = new Set<string>();
const step = activity("r_step", async (_ctx, n: number) => n * 2);
const undo = activity("r_undo", async () => undefined);
// Each instance's first attempt fails, so every job leaves an attempt row.
const fragile = activity("r_fragile", async (ctx) => {
  if (!failedOnce.has(ctx.instanceId)) {
    failedOnce.add(ctx.instanceId);
    throw new Error("first attempt fails");
  }
  return "ok";
}, { retry: { initialIntervalSeconds: 0.01, maxAttempts: 3 } });
const job = workflow("r_job", async (ctx, n: number) => {
  await registerCompensation(ctx, undo);
  await fragile(ctx);
  return step(ctx, n);
});
const looper = workflow("r_looper", async (ctx, left: number) => {
  await step(ctx, left);
  if (left > 0) return ctx.recur(left - 1);
  return "done";
});

const rows = async (query: ReturnType<typeof sql>) => Number((await queryRows<{ n: unknown }>(t.database.db, sql`SELECT count(*)::int AS n FROM (${query}) q`))[0]!.n);
const age = (table: string, column: string, where: ReturnType<typeof sql>) =>
  t.database.db.execute(sql`UPDATE ${sql.raw(table)} SET ${sql.raw(column)} = ${sql.raw(column)} - interval '2 hours' WHERE ${where}`);

beforeAll(async () => {
  const database = await openTestDatabase("postgres-js", "retention");
  t = makeTestApp(database, {
    workflows: [job, looper],
    retention: { finishedInstancesSeconds: 3600, channelMessagesSeconds: 3600, cloudEventDedupeSeconds: 3600 },
  });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

it("old finished instances go with everything they own; young and unfinished ones stay; archived runs are visible until then", async () => {
  const old = await Promise.all([1, 2, 3, 4, 5].map((n) => t.edda.start("r_job", n)));
  const young = await t.edda.start("r_job", 6);
  const loop = await t.edda.start("r_looper", 2);
  for (const s of [...old, young, loop]) expect((await t.waitFor(s.instanceId)).status).toBe("completed");
  const oldIds = old.map((s) => s.instanceId);
  const inOld = sql.join(oldIds.map((i) => sql`${i}`), sql`, `);
  // attempt rows and compensations exist for the old ones
  expect(await rows(sql`SELECT 1 FROM workflow_history WHERE instance_id IN (${inOld}) AND event_type = 'ActivityAttemptFailed'`)).toBe(5);
  expect(await rows(sql`SELECT 1 FROM workflow_compensations WHERE instance_id IN (${inOld})`)).toBe(5);
  // an unfinished instance, old: never purged
  await t.database.db.execute(sql`INSERT INTO workflow_instances (instance_id, workflow_name, source_hash, owner_service, status, input_data)
    SELECT 'r-waiting', workflow_name, source_hash, owner_service, 'waiting_for_message', '1' FROM workflow_instances WHERE instance_id = ${young.instanceId}`);
  await age("workflow_instances", "updated_at", sql`instance_id IN (${inOld}) OR instance_id = 'r-waiting'`);

  // the recur loop's archived runs are listed while it is kept
  const runsBefore = await t.edda.app.request(`/ui/instances/${loop.instanceId}`);
  expect(await runsBefore.text()).toContain("run 1");

  const r = await t.edda.sweep({ batchSize: 2 });
  expect(r.failures).toEqual([]);
  expect(r.rowFailures).toEqual([]);
  expect(r.instancesPurged).toBe(5);
  for (const id of oldIds) expect(await t.edda.getInstance(id)).toBeNull();
  for (const table of ["workflow_history", "workflow_compensations", "workflow_history_archive"]) {
    expect(await rows(sql`SELECT 1 FROM ${sql.raw(table)} WHERE instance_id IN (${inOld})`)).toBe(0);
  }
  expect((await t.edda.getInstance(young.instanceId))?.status).toBe("completed");
  expect((await t.edda.getInstance("r-waiting"))?.status).toBe("waiting_for_message");
  expect(await rows(sql`SELECT 1 FROM workflow_history_archive WHERE instance_id = ${loop.instanceId}`)).toBeGreaterThan(0);

  // once the loop is old too, its archived runs go with it
  await age("workflow_instances", "updated_at", sql`instance_id = ${loop.instanceId}`);
  const again = await t.edda.sweep({ batchSize: 2 });
  expect(again.instancesPurged).toBe(1);
  expect(await rows(sql`SELECT 1 FROM workflow_history_archive WHERE instance_id = ${loop.instanceId}`)).toBe(0);
});

it("old CloudEvent dedupe rows and channel messages go, young ones stay", async () => {
  for (const id of ["e-old", "e-young"]) {
    const res = await t.edda.app.request("/events", {
      method: "POST",
      headers: { "content-type": "application/json", "ce-specversion": "1.0", "ce-type": "r.ping", "ce-source": "/retention", "ce-id": id },
      body: JSON.stringify({ id }),
    });
    expect(res.status).toBe(202);
  }
  await age("cloudevent_dedupe", "received_at", sql`source = '/retention' AND event_id = 'e-old'`);
  await age("channel_messages", "published_at", sql`channel = 'r.ping' AND data LIKE '%e-old%'`);
  const r = await t.edda.sweep({ batchSize: 1 });
  expect(r.failures).toEqual([]);
  expect(r.dedupeRowsPurged).toBe(1);
  expect(r.channelMessagesDeleted).toBe(1);
  const left = await queryRows<{ event_id: string }>(t.database.db, sql`SELECT event_id FROM cloudevent_dedupe WHERE source = '/retention'`);
  expect(left.map((x) => x.event_id)).toEqual(["e-young"]);
  expect(await rows(sql`SELECT 1 FROM channel_messages WHERE channel = 'r.ping'`)).toBe(1);
});
