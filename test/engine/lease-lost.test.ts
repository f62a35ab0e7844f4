// Regression: the lease-renewal result was ignored, so a step that lost its
// lease kept running activities. Now a failed renewal stops the step before
// its next activity: it ends `lease_lost` and commits nothing.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

let t: TestApp;
let insideRuns = 0;
let stolen = false;

const slowOutside = activity(
  "ll_slow_outside",
  async (ctx) => {
    if (!stolen) {
      stolen = true;
      // Another worker takes the instance over while this activity runs.
      await t.database.db.execute(sql`UPDATE workflow_instances SET lock_token = lock_token + 1, lock_expires_at = now() + interval '1 second' WHERE instance_id = ${ctx.instanceId}`);
      await new Promise((r) => setTimeout(r, 1500));
    }
    return "slow done";
  },
  { transactional: false },
);
const insideWrite = activity("ll_inside_write", async () => {
  insideRuns++;
  return "written";
});
const wf = workflow("ll_wf", { lockTimeoutSeconds: 1 }, async (ctx) => Promise.all([slowOutside(ctx), insideWrite(ctx)]));

describe("lease lost during a step", () => {
  beforeAll(async () => {
    t = makeTestApp(await openTestDatabase("postgres-js", "lease_lost"), { workflows: [wf] });
  });
  afterAll(async () => {
    await t.edda.close();
  });

  it("a step whose renewal finds the lease gone starts no further activity and commits nothing", async () => {
    const { instanceId } = await t.edda.start(wf, null);
    const deadline = Date.now() + 15_000;
    let inst = await t.edda.getInstance(instanceId);
    while (inst?.status !== "completed" && Date.now() < deadline) {
      await t.edda.sweep();
      await new Promise((r) => setTimeout(r, 100));
      inst = await t.edda.getInstance(instanceId);
    }
    expect(inst?.status).toBe("completed");
    expect(inst?.output).toEqual(["slow done", "written"]);
    // The transactional activity ran once: never in the step that had lost its lease.
    expect(insideRuns).toBe(1);
  });
});
