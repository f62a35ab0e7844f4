// A step whose database connection is terminated under it (pg_terminate_backend,
// as a restart or an operator does) on real Postgres: the step's writes roll
// back, no attempt of the activity is counted, and the step runs again at once
// on a fresh connection — no sweep, no lease expiry needed.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

let calls = 0;
const write = activity("cl_write", async (ctx) => {
  calls++;
  await ctx.tx.execute(sql`INSERT INTO cl_rows (instance_id) VALUES (${ctx.instanceId})`);
  if (calls === 1) await ctx.tx.execute(sql`SELECT pg_terminate_backend(pg_backend_pid())`);
  return calls;
});
const writer = workflow("cl_writer", async (ctx) => write(ctx));

let app: TestApp;
beforeAll(async () => {
  const pg = await freshPostgres("connection_loss");
  app = makeTestApp(pg.open(), { workflows: [writer] });
  await app.database.db.execute(sql`CREATE TABLE cl_rows (id serial PRIMARY KEY, instance_id text NOT NULL)`);
});
afterAll(async () => {
  await app?.edda.close();
  await app?.database.close();
});

it("a connection killed inside a transactional activity: rolled back, retried at once without counting an attempt, written once", { timeout: 30_000 }, async () => {
  const { instanceId } = await app.edda.start("cl_writer", null);
  const done = await app.waitFor(instanceId, ["completed", "failed"], 10_000); // the lease is 300 s: only the re-dispatch can finish it
  expect(done.status).toBe("completed");
  expect(done.output).toBe(2);
  expect(calls).toBe(2);
  expect(done.history!.map((h) => h.eventType)).toEqual(["ActivityCompleted"]);
  const rows = await queryRows<{ n: number }>(app.database.db, sql`SELECT count(*)::int AS n FROM cl_rows WHERE instance_id = ${instanceId}`);
  expect(Number(rows[0]!.n)).toBe(1);
});
