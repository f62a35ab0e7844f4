// Child workflows on real Postgres: invoke returns the child's typed output,
// a child's failure reaches the parent as ChildWorkflowError, a child is
// started exactly once per operation, its conclusion wakes the parent in the
// same transaction, and cancelling a parent cancels its running children
// (compensations run) except detached ones. Two engines race throughout.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, ChildWorkflowError, invoke, registerCompensation, sleep, startChild, TerminalError, workflow } from "../../src/index.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { fanoutChildren } from "../../functions/workflows/fanout-children.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const fail = activity("ch_fail", async (_ctx, why: string) => {
  throw new TerminalError(why);
});
const failing = workflow("ch_failing", async (ctx, why: string) => fail(ctx, why));
const catcher = workflow("ch_catcher", async (ctx, why: string) => {
  try {
    await invoke(ctx, failing, why);
    return { caught: null };
  } catch (e) {
    const err = e as ChildWorkflowError;
    return { caught: err.name, child: err.childInstanceId, status: err.childStatus, cause: (err.cause as Error).name, message: (err.cause as Error).message };
  }
});

const undo = activity("ch_undo", async (ctx, who: string) => {
  await ctx.tx.execute(sql`INSERT INTO ch_undone (who) VALUES (${who})`);
  return null;
});
const mark = activity("ch_mark", async () => null);
const longChild = workflow("ch_long", async (ctx, who: string) => {
  await mark(ctx);
  await registerCompensation(ctx, undo, who);
  await sleep(ctx, 3600);
  return who;
});
const invokesLong = workflow("ch_invokes_long", async (ctx) => {
  try {
    return await invoke(ctx, longChild, "direct");
  } catch (e) {
    const err = e as ChildWorkflowError;
    return { caught: err.name, status: err.childStatus };
  }
});
const parentOfLong = workflow("ch_parent", async (ctx) => {
  await startChild(ctx, longChild, "detached", { detached: true, instanceId: `${ctx.instanceId}-detached` });
  const fireAndForget = await startChild(ctx, longChild, "attached");
  const waited = await invoke(ctx, longChild, "invoked");
  return { fireAndForget, waited };
});

let pg: { url: string; open(): Database };
let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  pg = await freshPostgres("children");
  const workflows = [fanoutChildren, pipeline, failing, catcher, longChild, parentOfLong, invokesLong];
  a = makeTestApp(pg.open(), { workflows, serviceName: "a" });
  b = makeTestApp(pg.open(), { workflows, serviceName: "b" });
  await a.database.db.execute(sql`CREATE TABLE ch_undone (who text NOT NULL)`);
});

afterAll(async () => {
  for (const app of [a, b]) {
    await app?.dispatcher.close();
    await app?.database.close();
  }
});

const count = async (q: ReturnType<typeof sql>) => Number((await queryRows<{ n: unknown }>(a.database.db, q))[0]!.n);

describe("child workflows", () => {
  it("fanout_children: parallel invokes return each child's output; one child per operation, linked both ways", { timeout: 60_000 }, async () => {
    const { instanceId } = await a.edda.start("fanout_children", { count: 5 });
    const done = await a.waitFor(instanceId, ["completed", "failed"], 30_000);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ completed: [3, 3, 3, 3, 3] });
    expect(done.children).toHaveLength(5);
    expect(done.children.every((c) => c.workflowName === "pipeline" && c.status === "completed")).toBe(true);
    const child = await a.edda.getInstance(done.children[0]!.instanceId);
    expect(child?.parentInstanceId).toBe(instanceId);
    expect(child?.output).toEqual({ completed: 3 });
    expect(await count(sql`SELECT count(*) AS n FROM workflow_instances WHERE parent_instance_id = ${instanceId}`)).toBe(5);
    // Every child id is derived from the parent's id and the operation id.
    expect(done.children.map((c) => c.instanceId).sort()).toEqual([1, 2, 3, 4, 5].map((n) => `${instanceId}:child_pipeline:${n}`));

    // The API and the viewer show the links both ways.
    const childId = `${instanceId}:child_pipeline:1`;
    const api = (await (await a.edda.app.request(`/instances/${instanceId}`)).json()) as { children: { instanceId: string }[] };
    expect(api.children.map((c) => c.instanceId)).toContain(childId);
    const listed = (await (await a.edda.app.request("/instances?workflow=pipeline&limit=100")).json()) as { instances: { instanceId: string; parentInstanceId: string | null }[] };
    expect(listed.instances.find((i) => i.instanceId === childId)?.parentInstanceId).toBe(instanceId);
    const parentPage = await (await a.edda.app.request(`/ui/instances/${instanceId}`)).text();
    expect(parentPage).toContain('id="children"');
    expect(parentPage).toContain(`href="/ui/instances/${encodeURIComponent(childId)}"`);
    const childPage = await (await a.edda.app.request(`/ui/instances/${encodeURIComponent(childId)}`)).text();
    expect(childPage).toContain(`id="parent-link" href="/ui/instances/${instanceId}"`);
    const listPage = await (await a.edda.app.request("/ui?workflow=pipeline")).text();
    expect(listPage).toContain(`child of <a href="/ui/instances/${instanceId}">`);
  });

  it("two engines, 8 parents × 3 children racing: every parent completes with its children's outputs, each outcome recorded once", { timeout: 90_000 }, async () => {
    const ids = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).edda.start("fanout_children", { count: 3 }).then((r) => r.instanceId)));
    for (const id of ids) {
      const done = await a.waitFor(id, ["completed", "failed"], 60_000);
      expect(done.output).toEqual({ completed: [3, 3, 3] });
      const outcomes = (done.history ?? []).filter((h) => h.eventType === "ChildCompleted");
      expect(outcomes.map((h) => h.activityId).sort()).toEqual(["child_pipeline:1:result", "child_pipeline:2:result", "child_pipeline:3:result"]);
    }
    expect(await count(sql`SELECT count(*) AS n FROM workflow_instances WHERE parent_instance_id IN (${sql.join(ids.map((id) => sql`${id}`), sql`, `)})`)).toBe(24);
  });

  it("a failed child is re-thrown in the parent as ChildWorkflowError with the child's error as cause", { timeout: 30_000 }, async () => {
    const { instanceId } = await b.edda.start("ch_catcher", "card declined");
    const done = await a.waitFor(instanceId);
    expect(done.output).toEqual({ caught: "ChildWorkflowError", child: `${instanceId}:child_ch_failing:1`, status: "failed", cause: "TerminalError", message: "card declined" });
  });

  it("a child cancelled on its own (after its compensation ran) is re-thrown in its waiting parent as a cancelled ChildWorkflowError", { timeout: 30_000 }, async () => {
    const { instanceId } = await a.edda.start("ch_invokes_long", null);
    await a.waitFor(instanceId, ["waiting_for_child"], 20_000);
    const child = `${instanceId}:child_ch_long:1`;
    await a.waitFor(child, ["waiting_for_timer"], 20_000);
    await b.edda.cancel(child);
    expect((await a.waitFor(instanceId)).output).toEqual({ caught: "ChildWorkflowError", status: "cancelled" });
    expect((await a.edda.getInstance(child))?.status).toBe("cancelled");
  });

  it("cancelling a parent cancels its running children (their compensations run) but not a detached one", { timeout: 60_000 }, async () => {
    const { instanceId } = await a.edda.start("ch_parent", null);
    await a.waitFor(instanceId, ["waiting_for_child"], 20_000);
    const view = await a.edda.getInstance(instanceId);
    expect(view!.children).toHaveLength(3);
    for (const c of view!.children) await a.waitFor(c.instanceId, ["waiting_for_timer"], 20_000);
    await b.edda.cancel(instanceId);
    const parent = await a.waitFor(instanceId, ["cancelled"]);
    expect(parent.status).toBe("cancelled");
    const attached = `${instanceId}:child_ch_long:2`;
    const invoked = `${instanceId}:child_ch_long:3`;
    for (const id of [attached, invoked]) {
      const c = await a.waitFor(id, ["cancelled"]);
      expect((c.cancellation as { cancelled_by: string }).cancelled_by).toBe(`parent:${instanceId}`);
    }
    expect((await a.edda.getInstance(`${instanceId}-detached`))?.status).toBe("waiting_for_timer");
    const undone = await queryRows<{ who: string }>(a.database.db, sql`SELECT who FROM ch_undone ORDER BY who`);
    expect(undone.map((r) => r.who).filter((w) => w !== "direct")).toEqual(["attached", "invoked"]);
    // The parent heard nothing from children cancelled along with it: its history has no child outcome.
    expect((parent.history ?? []).filter((h) => h.eventType.startsWith("Child"))).toEqual([]);
    await a.edda.cancel(`${instanceId}-detached`);
  });
});
