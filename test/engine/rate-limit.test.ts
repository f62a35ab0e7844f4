// Rate limits on real Postgres: three engines start 50 instances of one key at
// once; never more than `limit` admissions fall in any `periodSeconds` window,
// the queue is admitted in start order by the dispatchers' wake-ups alone (no
// sweep), and the sweep admits it where no wake-up fires. Bad options and keys
// are typed errors that store nothing.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { ValidationError } from "../../src/core/errors.ts";
import { LocalDispatcher } from "../../src/engine/dispatcher.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const LIMIT = 10;
const PERIOD = 1;

const mark = activity("rl_mark", async (ctx) => {
  await ctx.tx.execute(sql`INSERT INTO rl_log (instance_id, at) VALUES (${ctx.instanceId}, clock_timestamp())`);
});
const send = workflow(
  "rl_send",
  { input: z.object({ account: z.string(), n: z.number() }), rateLimit: { key: (i: { account: string }) => i.account, limit: LIMIT, periodSeconds: PERIOD } },
  async (ctx, input) => {
    await mark(ctx);
    return input.n;
  },
);
// Registered only on the engine without wake-ups, so the other engines' wake-ups cannot admit its queue.
const blindSend = workflow("rl_blind", { input: z.number(), rateLimit: { key: () => "k", limit: 2, periodSeconds: PERIOD } }, async (ctx, n) => {
  await mark(ctx);
  return n;
});
const hostile = workflow("rl_hostile", { input: z.object({ k: z.unknown() }), rateLimit: { key: (i: { k: unknown }) => (i.k === "throw" ? (null as unknown as { x: string }).x : (i.k as string)), limit: 1, periodSeconds: 60 } }, async () => "ran");

interface Admission {
  instance_id: string;
  status: string;
  admitted: number | null;
  started: string;
  ran: number | null;
}

describe("rateLimit on real Postgres with several engines", () => {
  const apps: TestApp[] = [];
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  beforeAll(async () => {
    pg = await freshPostgres("rate_limit");
    for (let i = 0; i < 3; i++) apps.push(makeTestApp(pg.open(), { workflows: [send, hostile] }));
    await apps[0]!.database.db.execute(sql`CREATE TABLE rl_log (instance_id text, at timestamptz)`);
  });
  afterAll(async () => {
    for (const a of apps) await a.edda.close();
  });
  const db = () => apps[0]!.database.db;
  const admissions = (key: string) =>
    queryRows<Admission>(
      db(),
      sql`SELECT i.instance_id, i.status, extract(epoch FROM i.admitted_at)::float8 AS admitted, i.started_at::text AS started,
                 extract(epoch FROM (SELECT min(at) FROM rl_log l WHERE l.instance_id = i.instance_id))::float8 AS ran
          FROM workflow_instances i WHERE rate_key = ${key} ORDER BY i.admitted_at NULLS LAST, i.started_at, i.instance_id`,
    );
  const instanceCount = async () => (await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances`))[0]!.n;

  it("50 starts of one key from three engines at once: at most 10 admissions in any 1 s window, in start order, all complete — with no sweep", async () => {
    const started = await Promise.all(Array.from({ length: 50 }, (_, n) => apps[n % 3]!.edda.start(send, { account: "acct-1", n })));
    // Every start is accepted (running, or queued: none dropped); the first window admits LIMIT at once
    // (more only if the burst itself outlasted a period, which the window check below still bounds).
    expect(new Set(started.map((s) => s.instanceId)).size).toBe(50);
    expect(started.every((s) => s.status === "running" || s.status === "queued")).toBe(true);
    expect(started.filter((s) => s.status === "running").length).toBeGreaterThanOrEqual(LIMIT);
    expect(started.filter((s) => s.status === "queued").length).toBeGreaterThan(0);
    expect((await apps[1]!.edda.start(send, { account: "acct-2", n: 0 })).status).toBe("running"); // another key has its own window

    for (const [n, s] of started.entries()) expect((await apps[n % 3]!.waitFor(s.instanceId, ["completed", "failed"], 20_000)).output).toBe(n);

    const rows = await admissions("rl_send:acct-1");
    expect(rows.length).toBe(50);
    const at = rows.map((r) => r.admitted!);
    // The invariant: any LIMIT+1 consecutive admissions span at least one period.
    for (let i = 0; i + LIMIT < at.length; i++) expect(at[i + LIMIT]! - at[i]!).toBeGreaterThanOrEqual(PERIOD);
    expect(at[49]! - at[0]!).toBeGreaterThanOrEqual(4 * PERIOD); // 50 starts at 10/s: five windows
    // The queue was admitted oldest first (started_at, instance_id: the order it keeps).
    const wasQueued = new Set(started.filter((s) => s.status === "queued").map((s) => s.instanceId));
    const queued = rows.filter((r) => wasQueued.has(r.instance_id));
    const byStart = [...queued].sort((a, b) => (a.started === b.started ? a.instance_id.localeCompare(b.instance_id) : a.started < b.started ? -1 : 1));
    expect(queued.map((r) => r.instance_id)).toEqual(byStart.map((r) => r.instance_id));
    // Each ran once, after its admission.
    for (const r of rows) expect(r.ran!).toBeGreaterThanOrEqual(r.admitted! - 0.001);
    const ran = await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM rl_log WHERE instance_id IN (SELECT instance_id FROM workflow_instances WHERE rate_key = 'rl_send:acct-1')`);
    expect(ran[0]!.n).toBe(50);
  }, 30_000);

  it("without wake-ups (a dispatcher that keeps none) the sweep admits the queue; a cancelled queued instance never runs", async () => {
    const blind = makeTestApp(pg.open(), { workflows: [blindSend], dispatcher: new LocalDispatcher({ maxWakeSeconds: 0 }) });
    try {
      const started: { instanceId: string; status: string }[] = [];
      for (let n = 0; n < 6; n++) started.push(await blind.edda.start(blindSend, n));
      expect(started.slice(2).every((s) => s.status === "queued")).toBe(true);
      expect((await blind.edda.cancel(started[3]!.instanceId)).status).toBe("cancelled");
      await blind.waitFor(started[0]!.instanceId);
      await new Promise((r) => setTimeout(r, PERIOD * 1000 + 300));
      const waiting = (await blind.edda.getInstance(started[2]!.instanceId))!;
      expect(waiting).toMatchObject({ status: "queued", flowControl: { rateKey: "k", admittedAt: null, concurrencyKey: null } }); // nobody woke it
      let report = await blind.edda.sweep();
      expect(report.failures).toEqual([]);
      expect(report.timedStarted).toBe(2); // 2 and 4: the window's room, in start order
      expect((await blind.edda.getInstance(started[5]!.instanceId))!.status).toBe("queued");
      await new Promise((r) => setTimeout(r, PERIOD * 1000 + 50));
      report = await blind.edda.sweep();
      expect(report.timedStarted).toBe(1);
      for (const n of [0, 1, 2, 4, 5]) expect((await blind.waitFor(started[n]!.instanceId)).output).toBe(n);
      expect((await blind.edda.getInstance(started[2]!.instanceId))!.flowControl!.admittedAt).not.toBeNull();
      const rows = await admissions("rl_blind:k");
      expect(rows.map((r) => r.instance_id)).toEqual([0, 1, 2, 4, 5, 3].map((n) => started[n]!.instanceId));
      expect(rows[5]).toMatchObject({ status: "cancelled", admitted: null, ran: null });
    } finally {
      await blind.edda.close();
    }
  });

  it("a key that throws or is not a string is a ValidationError and stores nothing (bad options at definition: test/core/flow-control.test.ts)", async () => {
    const before = await instanceCount();
    for (const k of ["throw", 42, "", "x".repeat(201)]) {
      await expect(apps[0]!.edda.start(hostile, { k })).rejects.toBeInstanceOf(ValidationError);
    }
    expect(await instanceCount()).toBe(before);
    // Valid traffic still flows and the sweep still succeeds.
    const ok = await apps[0]!.edda.start(hostile, { k: "fine" });
    expect((await apps[0]!.waitFor(ok.instanceId)).output).toBe("ran");
    expect((await apps[1]!.edda.sweep()).failures).toEqual([]);
  });
});
