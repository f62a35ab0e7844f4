// Follow-ups on Cloudflare Queues in real workerd (`wrangler dev`, local
// queue from wrangler.toml): every step of a 200-step pipeline runs in a
// top-level queue() invocation (no follow-up ever arrives as a nested fetch);
// a 5 s sleep fires within about a second of due with no cron run; killing
// wrangler mid-pipeline loses nothing — after a restart the cron sweep
// resumes the instance and every step ran exactly once in the history.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { api, startWrangler, waitForStatus, type Server } from "./processes.ts";

interface Counts {
  fetchFollowUps: number;
  queueBatches: number;
  queueMessages: number;
  scheduled: number;
}

let worker: Server;
let db: Database;
let vars: Record<string, string>;

beforeAll(async () => {
  const url = await freshDatabase("workerd_queue");
  db = createPostgresJsDatabase({ url, max: 2 });
  await migrate(db.db);
  // Short leases: a step killed with wrangler is resumable 3 s later rather than 30 s / 5 min.
  vars = { DATABASE_URL: url, EDDA_SECRET: "queue-secret", EDDA_ALLOW_UNAUTHENTICATED: "1", EDDA_LEASE_SECONDS: "3", EDDA_HANDOFF_LEASE_SECONDS: "3" };
  worker = await startWrangler(vars);
}, 90_000);

afterAll(async () => {
  await worker?.stop("SIGKILL");
  await db?.close();
});

const counts = async () => (await api<Counts>(worker.url, "GET", "/_edda/invocations")).body;
const start = async (name: string, input: unknown, instanceId: string) => {
  const r = await api<{ instanceId: string }>(worker.url, "POST", `/workflows/${name}/instances`, { input, instanceId });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.instanceId;
};
const completedSteps = async (id: string) =>
  queryRows<{ activity_id: string }>(db.db, sql`SELECT activity_id FROM workflow_history WHERE instance_id = ${id} AND event_type = 'ActivityCompleted' ORDER BY id`);

it("a 200-step pipeline completes with every step run by a top-level queue() invocation", { timeout: 120_000 }, async () => {
  const before = await counts();
  const id = await start("pipeline", { steps: 200 }, "queue-pipe-200");
  const done = await waitForStatus(worker.url, id, ["completed", "failed"], 110_000);
  expect(done.output).toEqual({ completed: 200 });
  const after = await counts();
  expect(after.fetchFollowUps - before.fetchFollowUps).toBe(0); // no nested follow-up fetch, ever
  expect(after.queueMessages - before.queueMessages).toBeGreaterThanOrEqual(200); // one message per step: the first, then a follow-up per activity
  expect(after.scheduled).toBe(before.scheduled);
  expect(new Set((await completedSteps(id)).map((r) => r.activity_id)).size).toBe(200);
});

it("a 5 s reminder fires within about a second of due, with no cron run", { timeout: 30_000 }, async () => {
  const before = await counts();
  const id = await start("reminder", { seconds: 5 }, "queue-reminder-5");
  await waitForStatus(worker.url, id, ["waiting_for_timer"], 10_000);
  const [timer] = await queryRows<{ due: string }>(db.db, sql`SELECT extract(epoch FROM expires_at)::float8 AS due FROM workflow_timer_subscriptions WHERE instance_id = ${id}`);
  const done = await waitForStatus(worker.url, id, ["completed"], 20_000);
  expect(done.output).toEqual({ reminded: true });
  const [fired] = await queryRows<{ at: string }>(db.db, sql`SELECT extract(epoch FROM created_at)::float8 AS at FROM workflow_history WHERE instance_id = ${id} AND event_type = 'TimerExpired'`);
  const lateBy = Number(fired!.at) - Number(timer!.due);
  expect(lateBy).toBeGreaterThanOrEqual(0);
  expect(lateBy).toBeLessThan(1.5);
  expect((await counts()).scheduled).toBe(before.scheduled);
});

it("killing wrangler dev mid-pipeline loses nothing: after a restart the sweep resumes it and each step ran once", { timeout: 150_000 }, async () => {
  const id = await start("pipeline", { steps: 80 }, "queue-pipe-killed");
  const deadline = Date.now() + 60_000;
  while ((await completedSteps(id)).length < 20) {
    if (Date.now() > deadline) throw new Error(`pipeline did not progress:\n${worker.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await worker.stop("SIGKILL");
  const atKill = (await completedSteps(id)).length;
  expect(atKill).toBeLessThan(80);

  worker = await startWrangler(vars);
  // The local queue died with the process; the database did not. Once the killed step's lease expires, the cron sweep resumes.
  await new Promise((r) => setTimeout(r, 3500));
  const res = await fetch(`${worker.url}/__scheduled?cron=${encodeURIComponent("* * * * *")}`);
  expect(res.status).toBe(200);
  await res.text();
  const done = await waitForStatus(worker.url, id, ["completed", "failed"], 90_000);
  expect(done.output).toEqual({ completed: 80 });
  const steps = (await completedSteps(id)).map((r) => r.activity_id);
  expect(steps).toHaveLength(80);
  expect(new Set(steps).size).toBe(80);
  expect((await counts()).fetchFollowUps).toBe(0);
});
