// A step whose database connection is terminated under it (pg_terminate_backend,
// as a restart or an operator does) on real Postgres: the step's writes roll
// back, no attempt of the activity is counted, and the step runs again at once
// on a fresh connection — no sweep, no lease expiry needed. Both postgres.js
// statement modes: named prepared statements (the default) and the
// per-request one (`prepare: false`, values inlined).
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

describe.each(["prepared", "inline"] as const)("postgres.js, %s statements", (mode) => {
  let calls = 0;
  const write = activity(`cl_write_${mode}`, async (ctx) => {
    calls++;
    await ctx.tx.execute(sql`INSERT INTO cl_rows (instance_id) VALUES (${ctx.instanceId})`);
    if (calls === 1) await ctx.tx.execute(sql`SELECT pg_terminate_backend(pg_backend_pid())`);
    return calls;
  });
  const writer = workflow(`cl_writer_${mode}`, async (ctx) => write(ctx));

  // The same in a tick of two transactional activities, each in its own savepoint.
  let tickCalls = 0;
  const tickWrite = activity(`cl_tick_write_${mode}`, async (ctx) => {
    tickCalls++;
    await ctx.tx.execute(sql`INSERT INTO cl_rows (instance_id, tag) VALUES (${ctx.instanceId}, 'tick')`);
    if (tickCalls === 1) await ctx.tx.execute(sql`SELECT pg_terminate_backend(pg_backend_pid())`);
    return tickCalls;
  });
  const tickOther = activity(`cl_tick_other_${mode}`, async (ctx) => {
    await ctx.tx.execute(sql`INSERT INTO cl_rows (instance_id, tag) VALUES (${ctx.instanceId}, 'other')`);
    return "other";
  });
  const tickWriter = workflow(`cl_tick_writer_${mode}`, async (ctx) => Promise.all([tickWrite(ctx), tickOther(ctx)]));

  // Two writes with something else awaited in between, while the step's connection is terminated by someone else.
  let pairCalls = 0;
  let stepPid: (pid: number) => void = () => undefined;
  let resumeFirst: () => void = () => undefined;
  const pair = activity(`cl_pair_${mode}`, async (ctx) => {
    pairCalls++;
    await ctx.tx.execute(sql`INSERT INTO cl_rows (instance_id, tag) VALUES (${ctx.instanceId}, 'a')`);
    if (pairCalls === 1) {
      const [row] = await queryRows<{ pid: number }>(ctx.tx, sql`SELECT pg_backend_pid() AS pid`);
      await new Promise<void>((resume) => {
        resumeFirst = resume;
        stepPid(row!.pid);
      });
    }
    await ctx.tx.execute(sql`INSERT INTO cl_rows (instance_id, tag) VALUES (${ctx.instanceId}, 'b')`);
    return pairCalls;
  });
  const pairWriter = workflow(`cl_pair_writer_${mode}`, async (ctx) => pair(ctx));

  let app: TestApp;
  beforeAll(async () => {
    const pg = await freshPostgres(`connection_loss_${mode}`);
    app = makeTestApp(createPostgresJsDatabase({ url: pg.url, max: 10, prepare: mode === "prepared" }), { workflows: [writer, pairWriter, tickWriter] });
    await app.database.db.execute(sql`CREATE TABLE cl_rows (id serial PRIMARY KEY, instance_id text NOT NULL, tag text)`);
  });
  afterAll(async () => {
    await app?.edda.close();
    await app?.database.close();
  });

  it("a connection killed inside a transactional activity: rolled back, retried at once without counting an attempt, written once", { timeout: 30_000 }, async () => {
    const { instanceId } = await app.edda.start(`cl_writer_${mode}`, null);
    const done = await app.waitFor(instanceId, ["completed", "failed"], 10_000); // the lease is 300 s: only the re-dispatch can finish it
    expect(done.status).toBe("completed");
    expect(done.output).toBe(2);
    expect(calls).toBe(2);
    expect(done.history!.map((h) => h.eventType)).toEqual(["ActivityCompleted"]);
    const rows = await queryRows<{ n: number }>(app.database.db, sql`SELECT count(*)::int AS n FROM cl_rows WHERE instance_id = ${instanceId}`);
    expect(Number(rows[0]!.n)).toBe(1);
  });

  it("a connection killed inside one of a tick's savepoints: the whole step rolls back, no attempt counted, each row once", { timeout: 30_000 }, async () => {
    const { instanceId } = await app.edda.start(`cl_tick_writer_${mode}`, null);
    const done = await app.waitFor(instanceId, ["completed", "failed"], 10_000);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual([2, "other"]);
    expect(done.history!.map((h) => h.eventType)).toEqual(["ActivityCompleted", "ActivityCompleted"]);
    const rows = await queryRows<{ tag: string; n: number }>(
      app.database.db,
      sql`SELECT tag, count(*)::int AS n FROM cl_rows WHERE instance_id = ${instanceId} GROUP BY tag ORDER BY tag`,
    );
    expect(rows.map((r) => [r.tag, Number(r.n)])).toEqual([["other", 1], ["tick", 1]]);
  });

  // The connection drops while the activity awaits something else: postgres.js rejects the transaction at once,
  // but the activity's code goes on. Its later statements must not run anywhere — not in autocommit on the
  // reconnected connection (a write of a failed step would commit), not inside another caller's transaction —
  // and no COMMIT/ROLLBACK of the dead transaction may reach a connection (postgres.js 3.4 would write it to a
  // closed socket from a timer: an uncatchable TypeError that ends the process).
  it("a connection killed while a transactional activity awaits: the orphaned activity writes nothing, the retry writes once", { timeout: 30_000 }, async () => {
    const pid = new Promise<number>((r) => (stepPid = r));
    const { instanceId } = await app.edda.start(`cl_pair_writer_${mode}`, null);
    await app.database.db.execute(sql`SELECT pg_terminate_backend(${await pid})`);
    // Use every connection of the pool, so the dropped one is reconnected and reused before the activity goes on.
    await Promise.all(Array.from({ length: 16 }, () => queryRows(app.database.db, sql`SELECT pg_sleep(0.05)`).catch(() => undefined)));
    const done = await app.waitFor(instanceId, ["completed", "failed"], 10_000);
    resumeFirst();
    await new Promise((r) => setTimeout(r, 300));
    expect(done.status).toBe("completed");
    expect(done.output).toBe(2);
    const rows = await queryRows<{ tag: string; n: number }>(
      app.database.db,
      sql`SELECT tag, count(*)::int AS n FROM cl_rows WHERE instance_id = ${instanceId} GROUP BY tag ORDER BY tag`,
    );
    expect(rows.map((r) => [r.tag, Number(r.n)])).toEqual([["a", 1], ["b", 1]]);
    // The pool still serves.
    expect(await queryRows(app.database.db, sql`SELECT 1 AS one`)).toEqual([{ one: 1 }]);
  });
});
