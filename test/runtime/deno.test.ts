// functions/deno.ts in real Deno (the `deno` npm package), against a fresh
// migrated database: workflows complete through follow-up requests, and a
// durable sleep is woken by the interval sweep (in-request timer waits are
// turned off, so nothing else could wake it). `deno check` covers the entry's types.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { api, ROOT, startDeno, waitForStatus, type Server } from "./processes.ts";

let deno: Server;
let db: Database;

beforeAll(async () => {
  const url = await freshDatabase("deno");
  db = createPostgresJsDatabase({ url, max: 1 });
  await migrate(db.db);
  deno = await startDeno({ DATABASE_URL: url, EDDA_SECRET: "deno-secret", EDDA_MAX_WAKE_SECONDS: "0", EDDA_SWEEP_INTERVAL_MS: "300" });
}, 90_000);

afterAll(async () => {
  await deno?.stop();
  await db?.close();
});

const start = async (name: string, input: unknown, instanceId: string) => {
  const r = await api<{ instanceId: string }>(deno.url, "POST", `/workflows/${name}/instances`, { input, instanceId });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.instanceId;
};

it("order_saga and pipeline started over HTTP complete through follow-up requests", async () => {
  const saga = await start("order_saga", { orderId: "d-1", amount: 5 }, "deno-saga");
  const pipe = await start("pipeline", { steps: 8 }, "deno-pipe");
  expect((await waitForStatus(deno.url, saga, ["completed", "failed"])).output).toEqual({ orderId: "d-1", status: "shipped" });
  expect((await waitForStatus(deno.url, pipe, ["completed", "failed"])).output).toEqual({ completed: 8 });
  expect(deno.output()).toContain("edda-edge (Deno) listening on");
});

it("the sweep fires timers: a reminder completes after its sleep", async () => {
  const id = await start("reminder", { seconds: 1 }, "deno-reminder");
  await waitForStatus(deno.url, id, ["waiting_for_timer"]);
  const done = await waitForStatus(deno.url, id, ["completed"], 10_000);
  expect(done.output).toEqual({ reminded: true });
});

it("functions/deno.ts and what it imports type-check under Deno (tsc does not see that entry)", { timeout: 90_000 }, async () => {
  const r = await promisify(execFile)(join(ROOT, "node_modules", ".bin", "deno"), ["check", "functions/deno.ts"], { cwd: ROOT, env: { ...process.env, NO_COLOR: "1" } });
  expect(r.stderr).toContain("Check");
});
