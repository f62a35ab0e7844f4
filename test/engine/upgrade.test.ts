// Safe code upgrades on real Postgres: `patched()` lets new code branch while
// instances started by the old code replay the old path; an instance whose
// replay diverges after a deploy is parked (visible, with both activity
// names, nothing compensated) and resumes once different code is deployed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, patched, registerCompensation, sendTo, waitMessage, workflow } from "../../src/index.ts";
import type { Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const stepB = activity("up_step_b", async () => "b");
const stepC = activity("up_step_c", async () => "c");
const undo = activity("up_undo", async () => null);

/** v1: the code running when the instances started. */
const v1 = workflow("up_flow", async (ctx) => {
  const first = await stepB(ctx);
  await registerCompensation(ctx, undo);
  await waitMessage(ctx, "go");
  return { path: first };
});
/** v2: a compatible change guarded by patched(). */
const v2 = workflow("up_flow", async (ctx) => {
  const first = (await patched(ctx, "use-c")) ? await stepC(ctx) : await stepB(ctx);
  await registerCompensation(ctx, undo);
  await waitMessage(ctx, "go");
  return { path: first };
});
/** v3: the same change made carelessly (no patched()): old histories diverge. */
const v3 = workflow("up_flow", async (ctx) => {
  const first = await stepC(ctx);
  await registerCompensation(ctx, undo);
  await waitMessage(ctx, "go");
  return { path: first, careless: true };
});
const sender = workflow("up_send", async (ctx, target: string) => {
  await sendTo(ctx, target, "go", "now");
});

let pg: { url: string; open(): Database };
const apps: TestApp[] = [];
const deploy = (wf: typeof v1) => {
  // One deployment id for every version (EDDA_DEPLOYMENT kept across deploys): each deploy takes over every
  // instance, and a replay that diverges parks it. With a deployment id per version, a divergent instance stays
  // on the code that started it instead (test/engine/deployment-versions.test.ts).
  const app = makeTestApp(pg.open(), { workflows: [wf, sender], serviceName: `deploy-${apps.length}`, deployment: "upgrade-prod" });
  apps.push(app);
  return app;
};

beforeAll(async () => {
  pg = await freshPostgres("upgrade");
});

/** An instance the v1 code started and left waiting for its message, v1's engine stopped: what a deploy finds. */
async function startedByOldCode(): Promise<string> {
  const old = deploy(v1);
  const { instanceId } = await old.edda.start("up_flow", null);
  await old.waitFor(instanceId, ["waiting_for_message"]);
  await old.dispatcher.close();
  return instanceId;
}

/** The careless v3 is deployed and the message arrives: the replay diverges and the instance is parked. */
async function parkedByCarelessDeploy(instanceId: string) {
  const careless = deploy(v3);
  await careless.edda.start("up_send", instanceId);
  return { careless, parked: await careless.waitFor(instanceId, ["parked", "completed", "failed"]) };
}

afterAll(async () => {
  for (const app of apps) {
    await app.dispatcher.close();
    await app.database.close();
  }
});

describe("safe code upgrades", () => {
  it("patched(): instances of the old code replay the old path, new instances take the new one", { timeout: 60_000 }, async () => {
    const before = await startedByOldCode();

    const next = deploy(v2);
    const { instanceId: after } = await next.edda.start("up_flow", null);
    await next.waitFor(after, ["waiting_for_message"]);
    for (const id of [before, after]) await next.edda.start("up_send", id);
    expect((await next.waitFor(before, ["completed", "failed", "parked"])).output).toEqual({ path: "b" });
    const done = await next.waitFor(after, ["completed", "failed", "parked"]);
    expect(done.output).toEqual({ path: "c" });
    expect(done.history?.some((h) => h.activityId === "patched_use-c")).toBe(true);
  });

  it("a replay that diverges after a deploy parks the instance with both names; deploying compatible code resumes it", { timeout: 60_000 }, async () => {
    const instanceId = await startedByOldCode();
    const { careless, parked } = await parkedByCarelessDeploy(instanceId);
    expect(parked.status).toBe("parked");
    const error = parked.error;
    expect(error?.error_type).toBe("NonDeterminismError");
    expect(error?.error_message).toContain('"up_step_b"');
    expect(error?.error_message).toContain('"up_step_c"');
    // Nothing was compensated and nothing new was recorded.
    expect(parked.history?.map((h) => h.eventType)).toEqual(["ActivityCompleted", "MessageReceived"]);
    // The same code sweeping again leaves it parked.
    expect((await careless.edda.sweep()).unparked).toBe(0);
    expect((await careless.edda.getInstance(instanceId))?.status).toBe("parked");
    await careless.dispatcher.close();

    const fixed = deploy(v2);
    const report = await fixed.edda.sweep();
    expect(report.unparked).toBe(1);
    const done = await fixed.waitFor(instanceId, ["completed", "failed", "parked"]);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ path: "b" });
  });

  it("an operator can resume a parked instance explicitly; resuming one that is not parked is a conflict", { timeout: 60_000 }, async () => {
    const instanceId = await startedByOldCode();
    const { careless, parked } = await parkedByCarelessDeploy(instanceId);
    expect(parked.status).toBe("parked");
    // Resumed under the same careless code, it diverges again and is parked again.
    await careless.edda.resume(instanceId);
    await new Promise((r) => setTimeout(r, 300));
    expect((await careless.waitFor(instanceId, ["parked"])).status).toBe("parked");
    await careless.dispatcher.close();
    const fixed = deploy(v2);
    await fixed.edda.resume(instanceId);
    expect((await fixed.waitFor(instanceId)).output).toEqual({ path: "b" });
    await expect(fixed.edda.resume(instanceId)).rejects.toThrow(/completed, not quarantined or parked/);
  });
});
