// Liveness and readiness apart, on real Postgres: /healthz answers 200 while
// the database is reachable for reads; /readyz takes a write through the
// engine's own path and answers 503 when writes fail (a read-only session:
// every start fails the same way) or do not finish within its timeout (the
// row it writes locked by another session), and 200 again once they work.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const step = activity("hz_step", async (_ctx, v: number) => v + 1);
const inc = workflow("hz_inc", async (ctx, n: number) => step(ctx, n));

let ok: TestApp;
let readOnly: TestApp;
let locker: Database;

beforeAll(async () => {
  const db = await freshPostgres("health");
  ok = makeTestApp(db.open(), { workflows: [inc] });
  // Every transaction of this one is read-only: reads work, every write fails (SQLSTATE 25006).
  readOnly = makeTestApp(createPostgresJsDatabase({ url: `${db.url}${db.url.includes("?") ? "&" : "?"}default_transaction_read_only=on`, max: 2 }), { workflows: [inc] });
  locker = db.open();
});
afterAll(async () => {
  for (const t of [ok, readOnly]) {
    await t.edda.close();
    await t.database.close();
  }
  await locker.close();
});

const get = async (t: TestApp, path: string) => {
  const res = await t.edda.app.request(path);
  return { status: res.status, body: (await res.json()) as Record<string, string> };
};

describe("health and readiness", () => {
  it("a working database: both 200", async () => {
    expect(await get(ok, "/healthz")).toEqual({ status: 200, body: { status: "ok", database: "ok" } });
    expect(await get(ok, "/readyz")).toEqual({ status: 200, body: { status: "ready", database: "writable", leases: { expired: 0, oldestExpiredSeconds: 0 }, sweep: { lastRunAt: expect.toSatisfy((v: unknown) => v === null || typeof v === "string"), expectedEverySeconds: null, overdue: false } } });
  });

  it("writes failing: /healthz still 200 (alive), /readyz 503, and indeed a start fails — logged as one JSON line with class and SQLSTATE, no SQL parameters", async () => {
    expect((await get(readOnly, "/healthz")).status).toBe(200);
    expect(await get(readOnly, "/readyz")).toEqual({ status: 503, body: { status: "not_ready", database: "failing" } });
    const lines: string[] = [];
    const spy = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
    try {
      const start = await readOnly.edda.app.request("/workflows/hz_inc/instances", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: 1, instanceId: "secret-payload-7f3a" }) });
      expect(start.status).toBe(500);
    } finally {
      spy.mockRestore();
    }
    const line = lines.find((l) => l.includes("unhandled error in request"));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ level: "error", error_class: "DrizzleQueryError", sqlstate: "25006", path: "/workflows/hz_inc/instances" });
    expect(lines.join("\n")).not.toContain("secret-payload-7f3a");
    expect(lines.join("\n")).not.toMatch(/params|Failed query/);
  });

  it("a write that hangs: /readyz answers 503 within its timeout, then 200 once the lock is gone", async () => {
    await get(ok, "/readyz"); // the row exists
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const locked = new Promise<void>((ready) => {
      void locker.db.transaction(async (tx) => {
        await tx.execute(sql`SELECT 1 FROM system_locks WHERE lock_name = 'edda:readyz' FOR UPDATE`);
        ready();
        await held;
      });
    });
    await locked;
    await new Promise((r) => setTimeout(r, 1100)); // past the cached outcome of the call above
    const t0 = Date.now();
    expect(await get(ok, "/readyz")).toEqual({ status: 503, body: { status: "not_ready", database: "timeout" } });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect((await get(ok, "/healthz")).status).toBe(200);
    release();
    for (let i = 0; i < 50 && (await get(ok, "/readyz")).status !== 200; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await get(ok, "/readyz")).toEqual({ status: 200, body: { status: "ready", database: "writable", leases: { expired: 0, oldestExpiredSeconds: 0 }, sweep: { lastRunAt: expect.toSatisfy((v: unknown) => v === null || typeof v === "string"), expectedEverySeconds: null, overdue: false } } });
    // and work flows
    await ok.edda.start(inc, 41, { instanceId: "hz-1" });
    expect((await ok.waitFor("hz-1")).output).toBe(42);
  });

  it("a flood of unauthenticated /readyz calls writes at most once a second (issue 42)", async () => {
    const t = makeTestApp(ok.database, { workflows: [inc], apiToken: "hz-token" });
    // Seen where the write lands: every write of the readiness row leaves a new row version (a new xmin).
    const stamp = async () => (await queryRows<{ v: string }>(locker.db, sql`SELECT xmin::text AS v FROM system_locks WHERE lock_name = 'edda:readyz'`))[0]?.v ?? null;
    await new Promise((r) => setTimeout(r, 1100));
    expect((await get(t, "/readyz")).status).toBe(200);
    const first = await stamp();
    const answers = await Promise.all(Array.from({ length: 200 }, () => get(t, "/readyz")));
    expect(answers.every((a) => a.status === 200 && a.body.database === "writable")).toBe(true);
    expect(await stamp()).toBe(first);
    await new Promise((r) => setTimeout(r, 1100));
    expect((await get(t, "/readyz")).status).toBe(200);
    expect(await stamp()).not.toBe(first); // a second later the write is checked again
    await t.edda.close();
  });
});
