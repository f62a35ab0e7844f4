// Concurrency keys on real Postgres: several engines start 50 instances of one
// key at once and never more than `limit` run; queued instances start in start
// order as slots free (a waiting instance keeps its slot); a worker that dies
// leaks no slot.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, waitMessage, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const mark = activity("fc_mark", async (ctx, what: string) => {
  await ctx.tx.execute(sql`INSERT INTO fc_log (instance_id, what, at) VALUES (${ctx.instanceId}, ${what}, clock_timestamp())`);
});
const limited = workflow("fc_limited", { input: z.object({ account: z.string() }), concurrency: { key: (i: { account: string }) => i.account, limit: 3 } }, async (ctx) => {
  await mark(ctx, "begin");
  await mark(ctx, "end");
});
const gate = workflow("fc_gate", { input: z.object({ account: z.string(), n: z.number() }), concurrency: { key: (i: { account: string }) => i.account, limit: 1 } }, async (ctx, input) => {
  await waitMessage(ctx, "go");
  return input.n;
});

describe("concurrency keys on real Postgres with several engines", () => {
  const apps: TestApp[] = [];
  beforeAll(async () => {
    const pg = await freshPostgres("flow_control");
    for (let i = 0; i < 3; i++) apps.push(makeTestApp(pg.open(), { workflows: [limited, gate] }));
    await apps[0]!.database.db.execute(sql`CREATE TABLE fc_log (instance_id text, what text, at timestamptz)`);
  });
  afterAll(async () => {
    for (const a of apps) await a.edda.close();
  });
  const db = () => apps[0]!.database.db;

  it("50 starts of one key from three engines at once: at most 3 in progress at any time, all 50 complete", async () => {
    const started = await Promise.all(Array.from({ length: 50 }, (_, i) => apps[i % 3]!.edda.start(limited, { account: "acct-1" })));
    expect(started.filter((s) => s.status === "running").length).toBe(3);
    const other = await apps[0]!.edda.start(limited, { account: "acct-2" });
    expect(other.status).toBe("running"); // another key has its own slots
    const sweeping = apps.map(async (a) => {
      for (let k = 0; k < 60; k++) {
        await a.edda.sweep();
        await new Promise((r) => setTimeout(r, 100));
      }
    });
    for (const [i, s] of started.entries()) expect((await apps[i % 3]!.waitFor(s.instanceId, ["completed", "failed"], 60_000)).status).toBe("completed");
    await Promise.all(sweeping);
    const log = await queryRows<{ instance_id: string; what: string }>(db(), sql`SELECT instance_id, what FROM fc_log WHERE instance_id IN (SELECT instance_id FROM workflow_instances WHERE concurrency_key = 'fc_limited:acct-1') ORDER BY at`);
    let running = 0;
    let peak = 0;
    for (const e of log) {
      running += e.what === "begin" ? 1 : -1;
      peak = Math.max(peak, running);
    }
    expect(log.length).toBe(100);
    expect(peak).toBeLessThanOrEqual(3);
    expect(peak).toBeGreaterThanOrEqual(2);
  }, 90_000);

  it("limit 1: a waiting instance keeps its slot; the queue starts in start order as each ends", async () => {
    const ids: string[] = [];
    for (let n = 0; n < 4; n++) ids.push((await apps[n % 3]!.edda.start(gate, { account: "g", n })).instanceId);
    await apps[0]!.waitFor(ids[0]!, ["waiting_for_message"]);
    for (const id of ids.slice(1)) expect((await apps[0]!.edda.getInstance(id))!.status).toBe("queued");
    for (let n = 0; n < 4; n++) {
      const app = apps[n % 3]!;
      await app.waitFor(ids[n]!, ["waiting_for_message"]);
      for (const later of ids.slice(n + 1)) expect((await app.edda.getInstance(later))!.status).toBe("queued");
      await app.edda.app.request(`/instances/${ids[n]}/messages`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ channel: "go", data: null }) });
      expect((await app.waitFor(ids[n]!)).output).toBe(n);
    }
  });

  it("a queued instance can be cancelled; a worker that died leaks no slot (its lease expires, the sweeper resumes it, the queue moves)", async () => {
    const first = await apps[0]!.edda.start(gate, { account: "d", n: 0 });
    const second = await apps[1]!.edda.start(gate, { account: "d", n: 1 });
    const third = await apps[2]!.edda.start(gate, { account: "d", n: 2 });
    await apps[0]!.waitFor(first.instanceId, ["waiting_for_message"]);
    expect((await apps[1]!.edda.cancel(second.instanceId)).status).toBe("cancelled");
    // The holder's worker "dies" mid-step: the row says running, locked by a worker that never comes back.
    await db().execute(sql`UPDATE workflow_instances SET status = 'running', locked_by = 'dead-worker', lock_token = lock_token + 1, lock_expires_at = now() - interval '1 second' WHERE instance_id = ${first.instanceId}`);
    await db().execute(sql`UPDATE channel_subscriptions SET activity_id = NULL WHERE instance_id = ${first.instanceId}`);
    await apps[2]!.edda.sweep();
    await apps[0]!.waitFor(first.instanceId, ["waiting_for_message"]);
    expect((await apps[0]!.edda.getInstance(third.instanceId))!.status).toBe("queued");
    await apps[0]!.edda.app.request(`/instances/${first.instanceId}/messages`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ channel: "go", data: null }) });
    await apps[0]!.waitFor(first.instanceId);
    await apps[2]!.waitFor(third.instanceId, ["waiting_for_message"]);
    await apps[2]!.edda.cancel(third.instanceId);
  });
});
