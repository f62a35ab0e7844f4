// `ctx.signal` on real Postgres: an activity's long HTTP call is aborted when
// the instance is cancelled or when its step's lease is taken over, so the call
// stops instead of running on for a result nobody can record. The HTTP server
// is real and observes the client going away.
import { createServer, type Server } from "node:http";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

/** First request to a path hangs until the client leaves; later ones answer "ok". */
let server: Server;
let base = "";
const arrived = new Map<string, number>();
const abandoned: string[] = [];
const reasons: string[] = [];

const call = activity(
  "sig_call",
  async (ctx, path: string) => {
    ctx.signal.addEventListener("abort", () => reasons.push(`${path}:${(ctx.signal.reason as Error).name}`));
    const res = await fetch(`${base}${path}`, { signal: ctx.signal });
    return res.text();
  },
  { transactional: false },
);
// A 2 s lease: the renewal (a third of it) notices a loss within 0.7 s.
const caller = workflow("sig_caller", { lockTimeoutSeconds: 2 }, async (ctx, path) => call(ctx, String(path)));

let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = req.url ?? "";
    const n = (arrived.get(path) ?? 0) + 1;
    arrived.set(path, n);
    if (n > 1) return void res.end("ok");
    res.on("close", () => {
      if (!res.writableEnded) abandoned.push(path);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const addr = server.address();
  base = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  const pg = await freshPostgres("activity_signal");
  a = makeTestApp(pg.open(), { workflows: [caller] });
  b = makeTestApp(pg.open(), { workflows: [caller] });
});

afterAll(async () => {
  for (const app of [a, b]) {
    await app?.edda.close();
    await app?.database.close();
  }
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

it("cancelling the instance aborts the activity's HTTP call; nothing is recorded for it", { timeout: 30_000 }, async () => {
  const { instanceId } = await a.edda.start("sig_caller", "/cancel");
  await until(() => arrived.get("/cancel") === 1, "the call reached the server");
  await a.edda.cancel(instanceId, "test");
  await until(() => abandoned.includes("/cancel"), "the server saw the client leave", 5000);
  expect(reasons).toContain("/cancel:LeaseLostError");
  const done = await a.waitFor(instanceId);
  expect(done.status).toBe("cancelled");
  expect(done.history!.filter((h) => h.activityId.startsWith("sig_call"))).toEqual([]);
  expect(arrived.get("/cancel")).toBe(1);
});

it("a lease taken over by another worker aborts the first worker's call; the new holder completes the activity once", { timeout: 30_000 }, async () => {
  const { instanceId } = await a.edda.start("sig_caller", "/takeover");
  await until(() => arrived.get("/takeover") === 1, "the call reached the server");
  // The first worker looks dead to the others: its lease expires and another worker's sweep takes the instance over.
  await until(async () => {
    await b.database.db.execute(sql`UPDATE workflow_instances SET lock_expires_at = now() - interval '1 second' WHERE instance_id = ${instanceId}`);
    return (await b.edda.sweep()).staleLeasesReleased > 0;
  }, "the sweep released the lease");
  await until(() => abandoned.includes("/takeover"), "the server saw the first call abandoned", 5000);
  expect(reasons).toContain("/takeover:LeaseLostError");
  const done = await b.waitFor(instanceId);
  expect(done.status).toBe("completed");
  expect(done.output).toBe("ok");
  const completions = await queryRows<{ n: number }>(
    b.database.db,
    sql`SELECT count(*)::int AS n FROM workflow_history WHERE instance_id = ${instanceId} AND event_type = 'ActivityCompleted'`,
  );
  expect(Number(completions[0]!.n)).toBe(1);
  expect(arrived.get("/takeover")).toBe(2);
});
