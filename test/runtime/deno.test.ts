// functions/deno.ts in real Deno (the `deno` npm package, KV and cron enabled
// by deno.json), against a fresh migrated database. Follow-ups travel on the
// Deno KV queue: a 200-step pipeline and order_saga complete through it; a
// 5 s reminder is fired by a delayed KV message within about a second of due
// (no interval sweep is configured and no cron run happens); a Deno killed
// mid-pipeline loses nothing — restarted on the same KV file, the queue and
// the database carry it to completion with each step run once. A second
// server with KV turned off runs the bounded fetch transport. `deno check`
// covers the entry's types. Compose and control on the same Deno
// (compose-flows.ts): children, matched events, a concurrency key and
// timeouts through the KV queue; a schedule tick made due is started by
// Deno.cron's sweep.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { checkSweepWork, composeFlows, prepareSweepWork, STRIPE_WEBHOOK_SECRET } from "./compose-flows.ts";
import { summarizeStreamFlow } from "./stream-flow.ts";
import { api, ROOT, startDeno, waitForStatus, type Server } from "./processes.ts";

let deno: Server;
let db: Database;
let env: Record<string, string>;
let kvDir: string;
let orphan: string;
/** Output length when the sweep work was prepared: a cron line after it is a sweep that saw it. */
let prepared: number;

beforeAll(async () => {
  const url = await freshDatabase("deno");
  db = createPostgresJsDatabase({ url, max: 1 });
  await migrate(db.db);
  kvDir = await mkdtemp(join(tmpdir(), "edda-deno-kv-"));
  env = { DATABASE_URL: url, EDDA_SECRET: "deno-secret", EDDA_WEBHOOK_STRIPE_SECRET: STRIPE_WEBHOOK_SECRET, EDDA_ALLOW_UNAUTHENTICATED: "1", EDDA_KV_PATH: join(kvDir, "kv.sqlite3"), EDDA_LEASE_SECONDS: "3", EDDA_HANDOFF_LEASE_SECONDS: "3" };
  deno = await startDeno(env);
  // Prepared first, so Deno.cron's next minute comes while the flows below run.
  ({ orphan } = await prepareSweepWork(url, deno.url, db, "dn"));
  prepared = deno.output().length;
}, 90_000);

afterAll(async () => {
  await deno?.stop();
  await db?.close();
  await rm(kvDir, { recursive: true, force: true });
});

const start = async (base: string, name: string, input: unknown, instanceId: string) => {
  const r = await api<{ instanceId: string }>(base, "POST", `/workflows/${name}/instances`, { input, instanceId });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.instanceId;
};
const completedSteps = async (id: string) =>
  (await queryRows<{ activity_id: string }>(db.db, sql`SELECT activity_id FROM workflow_history WHERE instance_id = ${id} AND event_type = 'ActivityCompleted' ORDER BY id`)).map((r) => r.activity_id);

it("a realtime stream on Deno: the client iterator reads every token once and in order, the emit, the end (LISTEN)", { timeout: 60_000 }, async () => {
  await summarizeStreamFlow(deno.url, "dn-stream");
});

it("order_saga and a 200-step pipeline complete through the Deno KV queue", { timeout: 120_000 }, async () => {
  expect(deno.output()).toContain("follow-ups via kv-queue");
  const saga = await start(deno.url, "order_saga", { orderId: "d-1", amount: 5 }, "deno-saga");
  const pipe = await start(deno.url, "pipeline", { steps: 200 }, "deno-pipe-200");
  expect((await waitForStatus(deno.url, saga, ["completed", "failed"])).output).toEqual({ orderId: "d-1", status: "shipped" });
  expect((await waitForStatus(deno.url, pipe, ["completed", "failed"], 110_000)).output).toEqual({ completed: 200 });
  expect(new Set(await completedSteps(pipe)).size).toBe(200);
});

composeFlows({ prefix: "dn", base: () => deno.url, db: () => db, transport: () => Promise.resolve(async () => {}) });

it("Deno.cron's sweep starts the due schedule tick, once; the orphaned run is timed out", { timeout: 90_000 }, async () => {
  const deadline = Date.now() + 75_000; // Deno.cron runs at minute boundaries
  while (!deno.output().slice(prepared).includes("edda: cron sweep done")) {
    if (Date.now() > deadline) throw new Error(`no Deno.cron sweep in time:\n${deno.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await checkSweepWork(deno.url, db, orphan);
});

it("a 5 s reminder is fired by a delayed KV message within about a second of due, with no sweep", { timeout: 30_000 }, async () => {
  const sweepsBefore = deno.output().split("edda: cron sweep done").length;
  const id = await start(deno.url, "reminder", { seconds: 5 }, "deno-reminder");
  await waitForStatus(deno.url, id, ["waiting_for_timer"]);
  const [timer] = await queryRows<{ due: number }>(db.db, sql`SELECT extract(epoch FROM expires_at)::float8 AS due FROM workflow_timer_subscriptions WHERE instance_id = ${id}`);
  expect((await waitForStatus(deno.url, id, ["completed"], 20_000)).output).toEqual({ reminded: true });
  const [fired] = await queryRows<{ at: number }>(db.db, sql`SELECT extract(epoch FROM created_at)::float8 AS at FROM workflow_history WHERE instance_id = ${id} AND event_type = 'TimerExpired'`);
  const lateBy = Number(fired!.at) - Number(timer!.due);
  expect(lateBy).toBeGreaterThanOrEqual(0);
  expect(lateBy).toBeLessThan(1.5);
  expect(deno.output().split("edda: cron sweep done").length).toBe(sweepsBefore);
});

it("a Deno killed mid-pipeline loses nothing: restarted on the same KV file it completes, each step once", { timeout: 120_000 }, async () => {
  const id = await start(deno.url, "pipeline", { steps: 80 }, "deno-pipe-killed");
  const deadline = Date.now() + 60_000;
  while ((await completedSteps(id)).length < 20) {
    if (Date.now() > deadline) throw new Error(`pipeline did not progress:\n${deno.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await deno.stop("SIGKILL");
  expect((await completedSteps(id)).length).toBeLessThan(80);
  deno = await startDeno({ ...env, EDDA_SWEEP_INTERVAL_MS: "1000" });
  const done = await waitForStatus(deno.url, id, ["completed", "failed"], 90_000);
  expect(done.output).toEqual({ completed: 80 });
  const steps = await completedSteps(id);
  expect(steps).toHaveLength(80);
  expect(new Set(steps).size).toBe(80);
});

it("without KV the bounded fetch transport carries follow-ups (the sweep continues past the hop bound)", { timeout: 60_000 }, async () => {
  const fetchDeno = await startDeno({ ...env, EDDA_KV: "off", EDDA_MAX_HOPS: "4", EDDA_SWEEP_INTERVAL_MS: "300" });
  try {
    expect(fetchDeno.output()).toContain("follow-ups via fetch");
    const id = await start(fetchDeno.url, "pipeline", { steps: 12 }, "deno-fetch-12");
    expect((await waitForStatus(fetchDeno.url, id, ["completed", "failed"], 40_000)).output).toEqual({ completed: 12 });
  } finally {
    await fetchDeno.stop();
  }
});

it("functions/deno.ts and what it imports type-check under Deno (tsc does not see that entry)", { timeout: 120_000 }, async () => {
  const r = await promisify(execFile)(join(ROOT, "node_modules", ".bin", "deno"), ["check", "functions/deno.ts"], { cwd: ROOT, env: { ...process.env, NO_COLOR: "1" } });
  expect(r.stderr).toContain("Check");
});
