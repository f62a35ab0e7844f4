// Values by reference in an R2 bucket (storage/r2-values.ts) on Miniflare's
// R2 — the local implementation `wrangler dev` binds — with the engine on
// PGlite: a 1 MiB result and output go to the bucket and none to
// workflow_payloads, a fork copies them under its own id, and a purge deletes
// the purged instance's objects and only those.
import { Miniflare } from "miniflare";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { largeReport } from "../../functions/workflows/large-report.ts";
import { engineOf } from "../../src/edda.ts";
import { activity, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { r2Values, type R2BucketLike } from "../../src/storage/r2-values.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const bigPart = activity("r2_big_part", async () => "b".repeat(400 * 1024));
const smallPart = activity("r2_small_part", async () => "s");
const twoParts = workflow("r2_two_parts", async (ctx) => ({ big: (await bigPart(ctx)).length, small: await smallPart(ctx) }));

let mf: Miniflare;
let bucket: R2BucketLike;
let t: TestApp;
const keys = async (prefix = "edda-values/") => (await bucket.list({ prefix })).objects.map((o) => o.key).sort();

beforeAll(async () => {
  mf = new Miniflare({ modules: true, script: "export default { fetch() { return new Response(null) } }", r2Buckets: ["VALUES"] });
  bucket = (await mf.getR2Bucket("VALUES")) as unknown as R2BucketLike;
  t = makeTestApp(await openTestDatabase("pglite", "r2"), { workflows: [largeReport, twoParts], largeValues: { store: r2Values(bucket) } });
}, 60_000);
afterAll(async () => {
  await t?.dispatcher.close();
  await t?.database.close();
  await mf?.dispose();
});

describe("r2Values", () => {
  it("large_report: the result and the output are objects in the bucket, no workflow_payloads row, the API answers the report whole", { timeout: 60_000 }, async () => {
    await t.edda.start("large_report", { sizeKiB: 1024, note: "r2" }, { instanceId: "r2-lr" });
    const done = await t.waitFor("r2-lr", ["completed", "failed"], 30_000);
    expect((done.output as { report: string }).report.length).toBe(1024 * 1024);
    expect(await keys("edda-values/r2-lr/")).toHaveLength(2);
    const [row] = await queryRows<{ n: number | string }>(t.database.db, sql`SELECT count(*) AS n FROM workflow_payloads`);
    expect(Number(row!.n)).toBe(0);
  });

  it("a fork copies the values under its own id; purging the source deletes the source's objects only", { timeout: 60_000 }, async () => {
    await t.edda.start("r2_two_parts", null, { instanceId: "r2-src" });
    await t.waitFor("r2-src", ["completed"]);
    const res = await t.edda.fetch(new Request("http://127.0.0.1/instances/r2-src/fork", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ fromActivityId: "r2_small_part:1" }) }));
    expect(res.status).toBe(201);
    const { instanceId } = (await res.json()) as { instanceId: string };
    await t.waitFor(instanceId, ["completed"]);
    expect((await keys(`edda-values/${instanceId}/`)).length).toBeGreaterThanOrEqual(1);
    const engine = await engineOf(t.edda);
    expect(await engine.storage.purgeFinishedInstances(0, 10, { onlyInstanceId: "r2-src" })).toEqual(["r2-src"]);
    expect(await keys("edda-values/r2-src/")).toEqual([]);
    expect(await keys("edda-values/r2-lr/")).toHaveLength(2);
    const copied = (await engine.storage.loadHistory(instanceId)).find((e) => e.activityId === "r2_big_part:1");
    expect(copied?.data.type === "json" && copied.data.json.length).toBeGreaterThan(400 * 1024);
  });
});
