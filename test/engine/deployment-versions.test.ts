// Issue 38: every instance finishes on code that can replay it. Two Node deployments side by side on
// one real Postgres — rel-1 (two engines) and rel-2 (one engine, an incompatible change to dv_order) —
// three engines racing their steps and sweeps: instances of each finish on their own code; an `auto`
// workflow with a compatible change moves to the newer deployment; a `pinned` one never does; retiring
// rel-1 leaves its dv_order instances waiting with why = pinned naming rel-1 (rel-2 checked them once
// and refused); an upgrade to a fixed deployment (POST /instances/:id/upgrade, and a bulk upgrade by
// deployment) moves them, and they finish there — while an upgrade to code that does not replay is a
// 409 with the mismatch that changes nothing.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, patched, waitMessage, workflow, type Edda } from "../../src/index.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const stepA = activity("dv_step_a", async () => "a");
const stepC = activity("dv_step_c", async () => "c");
const stepB = activity("dv_step_b", async () => "b");

/** rel-1's dv_order. */
const orderV1 = workflow("dv_order", async (ctx) => {
  const first = await stepA(ctx);
  await waitMessage(ctx, "go");
  return { first, second: await stepB(ctx), code: "v1" };
});
/** rel-2's: the first activity changed without patched() — rel-1's histories do not replay with it. */
const orderV2 = workflow("dv_order", async (ctx) => {
  const first = await stepC(ctx);
  await waitMessage(ctx, "go");
  return { first, second: await stepB(ctx), code: "v2" };
});
/** rel-3's: the fix — patched() keeps the old path for old histories; pinned, so only an operator moves instances here. */
const orderV3 = workflow("dv_order", { versioning: "pinned" }, async (ctx) => {
  const first = (await patched(ctx, "use-c")) ? await stepC(ctx) : await stepA(ctx);
  await waitMessage(ctx, "go");
  return { first, second: await stepB(ctx), code: "v3" };
});

/** `auto` (the default) with a compatible change: rel-1's instances may move to rel-2. */
const noteV1 = workflow("dv_note", async (ctx) => ({ got: await waitMessage(ctx, "go"), code: "v1" }));
const noteV2 = workflow("dv_note", async (ctx) => ({ got: await waitMessage(ctx, "go"), code: "v2" }));
/** `pinned` with the same compatible change: never moves. */
const keepV1 = workflow("dv_keep", { versioning: "pinned" }, async (ctx) => ({ got: await waitMessage(ctx, "go"), code: "v1" }));
const keepV2 = workflow("dv_keep", { versioning: "pinned" }, async (ctx) => ({ got: await waitMessage(ctx, "go"), code: "v2" }));

const TOKEN = "dv-token";
const REL1 = [orderV1, noteV1, keepV1];
const REL2 = [orderV2, noteV2, keepV2];
const REL3 = [orderV3, noteV2, keepV2];

let pg: { url: string; open(): Database };
let admin: Database;
const apps: TestApp[] = [];
let a1: TestApp;
let a2: TestApp;
let b: TestApp;

const app = (deployment: string, workflows: typeof REL1) => {
  // sweepIntervalSeconds 0.2: a deployment unseen for 1 s (five cadences) counts as no longer served.
  const t = makeTestApp(pg.open(), { workflows, deployment, apiToken: TOKEN, sweepIntervalSeconds: 0.2, serviceName: `dv-${deployment}-${apps.length}` });
  apps.push(t);
  return t;
};
const call = async (edda: Edda, method: string, path: string, body?: unknown) => {
  const res = await edda.fetch(
    new Request(`http://localhost${path}`, { method, headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) }),
  );
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
const row = async (id: string) =>
  (await queryRows<{ deployment: string | null; replay_refused_by: string | null; status: string }>(admin.db, sql`SELECT deployment, replay_refused_by, status FROM workflow_instances WHERE instance_id = ${id}`))[0]!;
/** Every engine sweeping at once, `rounds` times: the race the routing must survive. */
const sweepAll = async (engines: TestApp[], rounds = 3) => {
  for (let i = 0; i < rounds; i++) await Promise.all(engines.map((e) => e.edda.sweep({ resumeIdleSeconds: 0 })));
};
/** Activity results recorded for `id`, by activity id (each recorded once: the unique key). */
const results = async (id: string) =>
  (await queryRows<{ activity_id: string }>(admin.db, sql`SELECT activity_id FROM workflow_history WHERE instance_id = ${id} AND event_type = 'ActivityCompleted' ORDER BY id`)).map((r) => r.activity_id);

beforeAll(async () => {
  pg = await freshPostgres("deployversions");
  admin = pg.open();
  a1 = app("rel-1", REL1);
  a2 = app("rel-1", REL1);
  b = app("rel-2", REL2);
  // rel-1 swept first: it is the older deployment.
  await a1.edda.sweep();
  await new Promise((r) => setTimeout(r, 20));
  await b.edda.sweep();
});
afterAll(async () => {
  for (const x of apps) await x.edda.close();
  for (const x of apps) await x.database.close();
  await admin?.close();
});

describe("deployments side by side (issue 38)", () => {
  const old: string[] = [];
  const fresh: string[] = [];

  it("three engines racing: instances of each deployment finish on their own code", { timeout: 60_000 }, async () => {
    for (let i = 0; i < 6; i++) old.push((await (i % 2 ? a1 : a2).edda.start("dv_order", null, { instanceId: `dv-old-${i}` })).instanceId);
    for (let i = 0; i < 6; i++) fresh.push((await b.edda.start("dv_order", null, { instanceId: `dv-new-${i}` })).instanceId);
    for (const id of old) await a1.waitFor(id, ["waiting_for_message"]);
    for (const id of fresh) await b.waitFor(id, ["waiting_for_message"]);
    // The messages go in through every engine (each dispatches the woken instance to itself), while all three sweep.
    const engines = [a1, a2, b];
    await Promise.all([
      ...[...old, ...fresh].map((id, i) => engines[i % 3]!.edda.publish("go", i, { targetInstanceId: id })),
      sweepAll(engines),
    ]);
    const done = await Promise.all([...old, ...fresh].map((id) => a1.waitFor(id, ["completed", "failed", "parked"])));
    for (const inst of done) {
      const mine = inst.instanceId.startsWith("dv-old") ? { code: "v1", first: "a", deployment: "rel-1" } : { code: "v2", first: "c", deployment: "rel-2" };
      expect(inst.status).toBe("completed");
      expect(inst.output).toMatchObject({ code: mine.code, first: mine.first, second: "b" });
      expect(inst.deployment).toBe(mine.deployment);
      // Each activity ran once: never replayed into the other code's path.
      expect(await results(inst.instanceId)).toEqual([`dv_step_${mine.first}:1`, "dv_step_b:1"]);
    }
    // rel-2 refused every rel-1 instance it took (once each) and left it to rel-1.
    for (const id of old) expect((await row(id)).replay_refused_by ?? "rel-2").toBe("rel-2");
  });

  it("an auto workflow with a compatible change moves to the newer deployment; a pinned one stays", { timeout: 60_000 }, async () => {
    const note = await a1.edda.start("dv_note", null, { instanceId: "dv-note" });
    const keep = await a2.edda.start("dv_keep", null, { instanceId: "dv-keep" });
    await a1.waitFor(note.instanceId, ["waiting_for_message"]);
    await a1.waitFor(keep.instanceId, ["waiting_for_message"]);
    // Delivered through rel-2's engine, which takes the woken instance first.
    await b.edda.publish("go", "moved?", { targetInstanceId: note.instanceId });
    const moved = await b.waitFor(note.instanceId);
    expect(moved).toMatchObject({ status: "completed", deployment: "rel-2", output: { code: "v2" } });
    await b.edda.publish("go", "kept?", { targetInstanceId: keep.instanceId });
    await sweepAll([a1, a2, b]);
    const kept = await b.waitFor(keep.instanceId);
    expect(kept).toMatchObject({ status: "completed", deployment: "rel-1", output: { code: "v1" } });
  });

  const stranded: string[] = [];

  it("retiring rel-1 leaves its instances pinned, untouched, with a why naming rel-1", { timeout: 60_000 }, async () => {
    for (let i = 0; i < 4; i++) stranded.push((await a1.edda.start("dv_order", null, { instanceId: `dv-stranded-${i}` })).instanceId);
    for (const id of stranded) await a1.waitFor(id, ["waiting_for_message"]);
    // GET /deployments: rel-1 is draining as rel-2 sees it.
    const listed = (await call(b.edda, "GET", "/deployments")).body as { current: string; deployments: { id: string; draining: boolean; instances: Record<string, number> }[] };
    expect(listed.current).toBe("rel-2");
    expect(listed.deployments.find((d) => d.id === "rel-1")).toMatchObject({ draining: true, instances: { waiting_for_message: 4 } });
    // The viewer's list says so too (an app of rel-2 with no token: the viewer without a login).
    const viewerApp = makeTestApp(pg.open(), { workflows: REL2, deployment: "rel-2", serviceName: "dv-viewer" });
    apps.push(viewerApp);
    const html = await (await viewerApp.edda.app.request("/ui")).text();
    expect(html).toMatch(/Deployments still draining: <code>rel-1<\/code> \(4 waiting for message\)/);
    // Retire rel-1: its engines stop.
    for (const x of [a1, a2]) await x.edda.close();
    for (const id of stranded) await b.edda.publish("go", "late", { targetInstanceId: id });
    await sweepAll([b], 2);
    await new Promise((r) => setTimeout(r, 1_200));
    await sweepAll([b], 1);
    for (const id of stranded) {
      const r = await row(id);
      // Never run by rel-2's code, never parked or failed: runnable, on rel-1, refused by rel-2 once.
      expect(r).toMatchObject({ deployment: "rel-1", replay_refused_by: "rel-2", status: "running" });
      expect(await results(id)).toEqual(["dv_step_a:1"]);
      const why = (await call(b.edda, "GET", `/instances/${id}/why`)).body as { reason: { kind: string; detail: string; next: string; blockedBy: string[]; facts: Record<string, unknown> } };
      expect(why.reason).toMatchObject({ kind: "pinned", blockedBy: ["rel-1"], facts: { deployment: "rel-1", currentDeployment: "rel-2", versioning: "auto" } });
      expect(why.reason.detail).toMatch(/pinned to deployment rel-1, and no engine of it has swept since .*does not replay its history: .*dv_step_a.*dv_step_c|dv_step_c.*dv_step_a/);
      expect(why.reason.next).toContain(`POST /instances/${id}/upgrade`);
    }
    // Checked once: rel-2's later sweeps do not take them again.
    expect((await b.edda.sweep({ resumeIdleSeconds: 0 })).resumed).toBe(0);
    // An upgrade to rel-2 (code that does not replay them) is refused with the mismatch and changes nothing.
    const refused = await call(b.edda, "POST", `/instances/${stranded[0]}/upgrade`);
    expect(refused.status).toBe(409);
    expect(String(refused.body.detail)).toMatch(/does not replay with deployment rel-2's code: .*dv_step/);
    expect(await row(stranded[0]!)).toMatchObject({ deployment: "rel-1", replay_refused_by: "rel-2" });
    expect((await call(b.edda, "POST", "/instances/no-such-instance/upgrade")).status).toBe(404);
  });

  it("after a fix (rel-3, pinned), an upgrade moves one and a bulk upgrade by deployment the rest; they finish there", { timeout: 60_000 }, async () => {
    const c = app("rel-3", REL3);
    await c.edda.sweep({ resumeIdleSeconds: 0 });
    // rel-3's dv_order is pinned: it does not take rel-1's instances by itself.
    expect(await row(stranded[0]!)).toMatchObject({ deployment: "rel-1" });
    expect(((await call(c.edda, "GET", `/instances/${stranded[0]}/why`)).body as { reason: { detail: string } }).reason.detail).toContain('workflow "dv_order" is pinned');
    const one = await call(c.edda, "POST", `/instances/${stranded[0]}/upgrade`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual({ instanceId: stranded[0], from: "rel-1", deployment: "rel-3", moved: true, next: "run dv_step_b:1", runnable: true });
    const done = await c.waitFor(stranded[0]!);
    expect(done).toMatchObject({ status: "completed", deployment: "rel-3", output: { code: "v3", first: "a", second: "b" } });
    // The rest by filter: a durable bulk operation.
    const op = await call(c.edda, "POST", "/instances/bulk", { filter: { deployment: "rel-1", workflow: "dv_order" }, action: "upgrade" });
    expect(op.status).toBe(202);
    const opId = String(op.body.operationId);
    for (let i = 0; i < 50; i++) {
      const p = (await call(c.edda, "GET", `/operations/${opId}`)).body;
      if (p.status === "completed") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await call(c.edda, "GET", `/operations/${opId}`)).body).toMatchObject({ status: "completed", action: "upgrade", done: 3, failed: 0 });
    await sweepAll([b, c], 2);
    for (const id of stranded.slice(1)) {
      const inst = await c.waitFor(id);
      expect(inst).toMatchObject({ status: "completed", deployment: "rel-3", output: { code: "v3", first: "a" } });
      expect(await results(id)).toEqual(["dv_step_a:1", "dv_step_b:1"]);
    }
    // Finished instances are not upgraded (409), and nothing is left on rel-1.
    expect((await call(c.edda, "POST", `/instances/${stranded[0]}/upgrade`)).status).toBe(409);
    const listed = (await call(c.edda, "GET", "/deployments")).body as { deployments: { id: string; draining: boolean }[] };
    expect(listed.deployments.find((d) => d.id === "rel-1")).toMatchObject({ draining: false });
  });

  it("an unknown versioning is refused when the workflow is declared", () => {
    expect(() => workflow("dv_bad", { versioning: "sometimes" as never }, async () => null)).toThrow(/versioning must be "pinned" or "auto"/);
  });
});
