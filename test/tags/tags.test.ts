// Tags (search attributes) on real Postgres with three engines racing: the
// same starts sent to every engine create each instance once with its tags;
// `setTags` in workflow code is recorded once and replays without writing
// again while the engines' sweeps race the steps; GET /instances?tag= (AND)
// finds exactly the instances with every tag. Refusals are typed and change
// nothing: a tags function that throws or returns too many, bad keys or long
// values (422 ValidationError, no instance), bad tags in setTags (a
// ValidationError the workflow catches), a malformed filter (400).
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { activity, setTags, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const TOKEN = "tags-token";
const note = activity("tg_note", async (_ctx, orderId: string) => `noted ${orderId}`);
const order = workflow(
  "tg_order",
  { input: z.object({ orderId: z.string(), region: z.string() }), tags: (i) => ({ orderId: i.orderId, region: i.region }) },
  async (ctx, input) => {
    await note(ctx, input.orderId);
    await setTags(ctx, { stage: "noted" });
    await note(ctx, input.orderId);
    return setTags(ctx, { stage: "done" });
  },
);
const throwing = workflow("tg_throwing", { tags: (i: { n: number }) => ({ n: String(i.n.toFixed(0)) }) }, async () => "never");
const many = workflow("tg_many", { tags: (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, "v"])) }, async () => "ok");
const shaped = workflow("tg_shaped", { tags: (t: Record<string, unknown>) => t as Record<string, string> }, async () => "ok");
const selfTagging = workflow("tg_self", async (ctx, tags: Record<string, string>) => {
  try {
    await setTags(ctx, tags);
    return "set";
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  }
});
const full = workflow("tg_full", { tags: () => Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, "v"])) }, async (ctx) => {
  try {
    await setTags(ctx, { extra: "one too many" });
    return "set";
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  }
});
const workflows = [order, throwing, many, shaped, selfTagging, full];
let apps: TestApp[] = [];

const api = (app: TestApp, path: string, init: RequestInit = {}) =>
  app.edda.app.request(path, { ...init, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...(init.headers as Record<string, string>) } });
const listIds = async (app: TestApp, query: string) => {
  const res = await api(app, `/instances?limit=100&${query}`);
  expect(res.status, query).toBe(200);
  return ((await res.json()) as { instances: { instanceId: string }[] }).instances.map((i) => i.instanceId).sort();
};
const instanceCount = async () => Number((await queryRows<{ n: number }>(apps[0]!.database.db, sql`SELECT count(*)::int AS n FROM workflow_instances`))[0]!.n);

beforeAll(async () => {
  const pg = await freshPostgres("tags");
  apps = [0, 1, 2].map(() => makeTestApp(pg.open(), { workflows, apiToken: TOKEN }));
}, 120_000);
afterAll(async () => {
  for (const a of apps) await a.edda.close();
  for (const a of apps) await a.database.close();
});

describe("with three engines racing", () => {
  it("each start stores its tags once; setTags is recorded once per call and the filter finds exactly the tagged instances", async () => {
    const N = 24;
    const ids = Array.from({ length: N }, (_, i) => `tg-${i}`);
    const region = (i: number) => (i % 3 === 0 ? "eu" : "us");
    // every engine starts every instance, all at once, while every engine sweeps
    const sweeping = { on: true };
    const sweeps = apps.map(async (a) => {
      while (sweeping.on) {
        const r = await a.edda.sweep({ resumeIdleSeconds: 0 });
        expect(r.failures).toEqual([]);
        await new Promise((res) => setTimeout(res, 10));
      }
    });
    const starts = await Promise.all(ids.flatMap((id, i) => apps.map((a) => a.edda.start("tg_order", { orderId: `o-${i}`, region: region(i) }, { instanceId: id }))));
    expect(starts.filter((s) => s.created)).toHaveLength(N);
    for (const id of ids) expect((await apps[1]!.waitFor(id, ["completed"], 30_000)).output).toEqual({ stage: "done" });
    sweeping.on = false;
    await Promise.all(sweeps);

    const rows = await queryRows<{ instance_id: string; key: string; value: string }>(apps[0]!.database.db, sql`SELECT instance_id, key, value FROM workflow_instance_tags WHERE instance_id LIKE 'tg-%' ORDER BY instance_id, key`);
    expect(rows).toHaveLength(N * 3);
    const view = (await (await api(apps[2]!, "/instances/tg-3")).json()) as { tags: Record<string, string> };
    expect(view.tags).toEqual({ orderId: "o-3", region: "eu", stage: "done" });
    // recorded once each: two setTags calls, two history records, whatever the races replayed
    const history = await queryRows<{ activity_id: string }>(apps[0]!.database.db, sql`SELECT activity_id FROM workflow_history WHERE instance_id = 'tg-3' AND activity_id LIKE 'edda.set_tags:%' AND event_type = 'ActivityCompleted'`);
    expect(history.map((h) => h.activity_id).sort()).toEqual(["edda.set_tags:1", "edda.set_tags:2"]);

    const eu = ids.filter((_, i) => region(i) === "eu").sort();
    expect(await listIds(apps[0]!, "tag=region:eu")).toEqual(eu);
    expect(await listIds(apps[1]!, "tag=region:eu&tag=stage:done")).toEqual(eu);
    expect(await listIds(apps[2]!, "tag=region:eu&tag=orderId:o-3")).toEqual(["tg-3"]);
    expect(await listIds(apps[0]!, "tag=region:eu&tag=orderId:o-1")).toEqual([]);
    expect(await listIds(apps[0]!, "tag=stage:noted")).toEqual([]);
    expect(await listIds(apps[0]!, "tag=region:eu&status=completed&workflow=tg_order")).toEqual(eu);
    expect((await apps[0]!.edda.findInstances({ tags: [["orderId", "o-4"]] })).instances.map((i) => i.instanceId)).toEqual(["tg-4"]);
  });
});

describe("refusals", () => {
  it("a tags function that throws or returns bad tags refuses the start with a ValidationError, and nothing is created", async () => {
    const before = await instanceCount();
    const refused = async (workflowName: string, input: unknown) => {
      const res = await api(apps[0]!, `/workflows/${workflowName}/instances`, { method: "POST", body: JSON.stringify({ input }) });
      expect(res.status, workflowName).toBe(422);
      const body = (await res.json()) as { error_type: string; issues: { message: string }[] };
      expect(body.error_type).toBe("ValidationError");
      return body.issues.map((i) => i.message).join("; ");
    };
    expect(await refused("tg_throwing", {})).toMatch(/threw/);
    expect(await refused("tg_many", 17)).toMatch(/at most 16 tags/);
    expect(await refused("tg_shaped", { "bad key!": "v" })).toMatch(/A-Z a-z 0-9/);
    expect(await refused("tg_shaped", { ["k".repeat(65)]: "v" })).toMatch(/1–64/);
    expect(await refused("tg_shaped", { k: "v".repeat(257) })).toMatch(/at most 256/);
    expect(await refused("tg_shaped", { k: 5 })).toMatch(/a value is a string/);
    expect(await refused("tg_shaped", { k: "a\u0000b" })).toMatch(/U\+0000/);
    await expect(apps[1]!.edda.start("tg_many", 17)).rejects.toMatchObject({ name: "ValidationError" });
    expect(await instanceCount()).toBe(before);
    // the boundaries are accepted
    const ok = await apps[0]!.edda.start("tg_many", 16);
    expect((await apps[0]!.waitFor(ok.instanceId)).status).toBe("completed");
    const edge = await apps[0]!.edda.start("tg_shaped", { ["k".repeat(64)]: "v".repeat(256), "a.b-c_d": "" });
    expect((await apps[0]!.waitFor(edge.instanceId)).status).toBe("completed");
    expect(await listIds(apps[2]!, `tag=${"k".repeat(64)}:${"v".repeat(256)}`)).toEqual([edge.instanceId]);
  });

  it("setTags with a bad key or more than 16 tags is a ValidationError the workflow catches; nothing is written", async () => {
    const bad = await apps[0]!.edda.start("tg_self", { "no spaces": "x" });
    expect((await apps[0]!.waitFor(bad.instanceId)).output).toMatch(/^ValidationError: /);
    const over = await apps[1]!.edda.start("tg_self", Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])));
    expect((await apps[1]!.waitFor(over.instanceId)).output).toMatch(/^ValidationError: .*at most 16 tags/);
    const rows = await queryRows<{ n: number }>(apps[0]!.database.db, sql`SELECT count(*)::int AS n FROM workflow_instance_tags WHERE instance_id IN (${bad.instanceId}, ${over.instanceId})`);
    expect(Number(rows[0]!.n)).toBe(0);
    // 16 from the start plus one more from setTags: refused inside the step (TerminalError), the 16 kept
    const full = await apps[0]!.edda.start("tg_full", null);
    expect((await apps[0]!.waitFor(full.instanceId)).output).toMatch(/^TerminalError: .*at most 16 tags/);
    expect(Object.keys(((await (await api(apps[0]!, `/instances/${full.instanceId}`)).json()) as { tags: Record<string, string> }).tags)).toHaveLength(16);
    const fine = await apps[2]!.edda.start("tg_self", { team: "ops" });
    expect((await apps[2]!.waitFor(fine.instanceId)).output).toBe("set");
    expect(await listIds(apps[0]!, "tag=team:ops")).toEqual([fine.instanceId]);
  });

  it("a malformed tag filter is a 400, and the next valid list answers", async () => {
    for (const q of ["tag=nocolon", `tag=${encodeURIComponent("bad key:v")}`, `tag=k:${"v".repeat(257)}`, Array.from({ length: 17 }, (_, i) => `tag=k${i}:v`).join("&")]) {
      const res = await api(apps[0]!, `/instances?${q}`);
      expect(res.status, q).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(/tag/);
    }
    expect(await listIds(apps[0]!, "tag=orderId:o-5")).toEqual(["tg-5"]);
  });
});
