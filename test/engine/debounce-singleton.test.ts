// Debounce and singleton on real Postgres with three engines racing: a burst
// of starts of one key collapses into one instance that runs once with the
// last input; starts of a singleton key while one is unfinished all return
// that instance. Bad keys are typed errors that store nothing.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, invoke, waitMessage, workflow } from "../../src/index.ts";
import { ValidationError } from "../../src/core/errors.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const record = activity("ds_record", async (ctx, n: number) => {
  await ctx.tx.execute(sql`INSERT INTO ds_log (instance_id, n) VALUES (${ctx.instanceId}, ${n})`);
});
const digest = workflow(
  "ds_digest",
  { input: z.object({ user: z.string(), n: z.number() }), debounce: { key: (i: { user: string }) => i.user, periodSeconds: 0.5 } },
  async (ctx, input) => {
    await record(ctx, input.n);
    return input.n;
  },
);
const capped = workflow(
  "ds_capped",
  { input: z.object({ n: z.number() }), debounce: { key: () => "all", periodSeconds: 0.6, maxWaitSeconds: 1 } },
  async (ctx, input) => {
    await record(ctx, input.n);
    return input.n;
  },
);
const deploy = workflow(
  "ds_deploy",
  { input: z.object({ env: z.unknown(), n: z.number() }), singleton: { key: (i: { env: unknown }) => i.env as string } },
  async (ctx, input) => {
    await waitMessage(ctx, "done");
    return input.n;
  },
);
const parent = workflow("ds_parent", async (ctx) => invoke(ctx, deploy, { env: "child", n: 0 }));

describe("debounce and singleton on real Postgres with several engines", () => {
  const apps: TestApp[] = [];
  beforeAll(async () => {
    const pg = await freshPostgres("debounce_singleton");
    for (let i = 0; i < 3; i++) apps.push(makeTestApp(pg.open(), { workflows: [digest, capped, deploy, parent] }));
    await apps[0]!.database.db.execute(sql`CREATE TABLE ds_log (instance_id text, n int)`);
  });
  afterAll(async () => {
    for (const a of apps) await a.edda.close();
  });
  const db = () => apps[0]!.database.db;
  const rowsOf = (name: string) => queryRows<{ instance_id: string; status: string; input_data: string }>(db(), sql`SELECT instance_id, status, input_data FROM workflow_instances WHERE workflow_name = ${name} ORDER BY started_at`);
  const log = (id: string) => queryRows<{ n: number }>(db(), sql`SELECT n FROM ds_log WHERE instance_id = ${id}`);
  const send = (app: TestApp, id: string) =>
    app.edda.app.request(`/instances/${id}/messages`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ channel: "done", data: null }) });

  it("debounce: 30 racing starts of one key from three engines collapse into one queued instance, then a burst of spaced starts runs once with the last input", async () => {
    const burst = await Promise.all(Array.from({ length: 30 }, (_, n) => apps[n % 3]!.edda.start(digest, { user: "u1", n })));
    const id = burst[0]!.instanceId;
    expect(burst.every((s) => s.instanceId === id && s.status === "queued")).toBe(true);
    expect(burst.filter((s) => s.created).length).toBe(1);
    const pending = (await apps[0]!.edda.getInstance(id))!;
    expect(pending.flowControl).toMatchObject({ debounceKey: "u1", rateKey: null });
    expect(Date.parse(pending.flowControl!.notBefore!)).toBeGreaterThan(Date.parse(pending.startedAt));
    // Spaced starts within the period keep pushing it back; the last input wins.
    for (let n = 100; n < 104; n++) {
      await new Promise((r) => setTimeout(r, 150));
      expect((await apps[n % 3]!.edda.start(digest, { user: "u1", n })).instanceId).toBe(id);
    }
    expect((await apps[0]!.edda.start(digest, { user: "u2", n: 7 })).instanceId).not.toBe(id); // another key
    expect((await apps[1]!.waitFor(id)).output).toBe(103);
    expect(await log(id)).toEqual([{ n: 103 }]);
    const u1 = (await rowsOf("ds_digest")).filter((r) => r.input_data.includes('"u1"'));
    expect(u1.length).toBe(1);
    // Once it ran, the next start makes a new pending instance.
    const next = await apps[2]!.edda.start(digest, { user: "u1", n: 200 });
    expect(next).toMatchObject({ status: "queued", created: true });
    expect(next.instanceId).not.toBe(id);
    expect((await apps[2]!.waitFor(next.instanceId)).output).toBe(200);
  });

  it("debounce with maxWaitSeconds: starts that never go quiet still run, at the latest maxWait after a burst's first start", async () => {
    const ids = new Set<string>();
    for (let n = 0; n < 12; n++) {
      ids.add((await apps[n % 3]!.edda.start(capped, { n })).instanceId);
      await new Promise((r) => setTimeout(r, 200));
    }
    // 2.4 s of starts 0.2 s apart never leave the key quiet for 0.6 s: only maxWait (1 s) starts them.
    expect(ids.size).toBeGreaterThanOrEqual(2);
    for (const id of ids) await apps[0]!.waitFor(id);
    const ran = (await queryRows<{ n: number }>(db(), sql`SELECT n FROM ds_log WHERE instance_id IN (SELECT instance_id FROM workflow_instances WHERE workflow_name = 'ds_capped') ORDER BY n`)).map((r) => r.n);
    expect(ran.length).toBe(ids.size);
    expect(ran.at(-1)).toBe(11); // the last input of the last burst
  });

  it("singleton: 30 racing starts of one key from three engines return one instance; after it ends the next start makes a new one", async () => {
    const starts = await Promise.all(Array.from({ length: 30 }, (_, n) => apps[n % 3]!.edda.start(deploy, { env: "prod", n })));
    const id = starts[0]!.instanceId;
    expect(starts.every((s) => s.instanceId === id)).toBe(true);
    expect(starts.filter((s) => s.created).length).toBe(1);
    const staging = await apps[1]!.edda.start(deploy, { env: "staging", n: 99 });
    expect(staging.instanceId).not.toBe(id);
    expect((await apps[0]!.waitFor(id, ["waiting_for_message"])).flowControl).toMatchObject({ singletonKey: "prod", debounceKey: null });
    const res = await apps[2]!.edda.app.request("/workflows/ds_deploy/instances", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { env: "prod", n: 1 } }) });
    expect(res.status).toBe(200); // an existing instance, not a new one
    expect(await res.json()).toEqual({ instanceId: id, status: "waiting_for_message" });
    expect((await rowsOf("ds_deploy")).filter((r) => r.input_data.includes('"prod"')).length).toBe(1);
    await send(apps[0]!, id);
    const first = (await apps[0]!.waitFor(id)).output as number;
    const again = await apps[1]!.edda.start(deploy, { env: "prod", n: 500 });
    expect(again.created).toBe(true);
    expect(again.instanceId).not.toBe(id);
    expect(starts.map((s, n) => ({ s, n })).find(({ s }) => s.created)!.n).toBe(first); // the one created ran with its own input
    for (const i of [again.instanceId, staging.instanceId]) {
      await apps[0]!.waitFor(i, ["waiting_for_message"]);
      await send(apps[0]!, i);
      await apps[0]!.waitFor(i);
    }
  });

  it("a singleton workflow started as a child fails the parent with a typed error; bad keys are refused and store nothing (bad options: test/core/flow-control.test.ts)", async () => {
    const p = await apps[0]!.edda.start(parent, {});
    const done = await apps[0]!.waitFor(p.instanceId);
    expect(done.status).toBe("failed");
    expect(JSON.stringify(done.error)).toMatch(/cannot be started as a child/);

    const count = async () => (await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances`))[0]!.n;
    const before = await count();
    for (const env of [42, "", null]) await expect(apps[1]!.edda.start(deploy, { env, n: 0 })).rejects.toBeInstanceOf(ValidationError);
    expect(await count()).toBe(before);
    // Valid traffic still flows and the sweep still succeeds.
    const ok = await apps[2]!.edda.start(digest, { user: "after", n: 1 });
    expect((await apps[2]!.waitFor(ok.instanceId)).output).toBe(1);
    expect((await apps[0]!.edda.sweep()).failures).toEqual([]);
  });
});
