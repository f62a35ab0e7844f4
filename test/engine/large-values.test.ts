// Large values by reference (storage/payload-refs.ts) on real Postgres and
// PGlite: the example large_report (shared/SPEC.md section 6) returns a 5 MiB
// report through the API with no history row over 64 KiB; a 2 MiB input goes
// by reference once the body limit allows it (413 by default); deleting an
// instance deletes its values; a value over MAX_VALUE_BYTES is a typed error
// naming it; with a key set, a value by reference is encrypted too. Postgres
// through postgres.js and Neon's driver, and PGlite.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { largeReport } from "../../functions/workflows/large-report.ts";
import { engineOf } from "../../src/edda.ts";
import { activity, invoke, MAX_VALUE_BYTES, workflow } from "../../src/index.ts";
import { toBase64 } from "../../src/core/serialization.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { findPostgresBin } from "../support/postgres-cluster.ts";

const MiB = 1024 * 1024;
const echo = workflow("echo_input", async (_ctx, input: { blob: string }) => ({ length: input.blob.length }));
const huge = activity("huge_result", async () => "x".repeat(MAX_VALUE_BYTES + 1));
const tooLarge = workflow("too_large", async (ctx) => {
  try {
    await huge(ctx);
    return { caught: null };
  } catch (err) {
    return { caught: (err as Error).name, message: (err as Error).message };
  }
});
const CANARY = "canary-large-5e1b";
const secretReport = activity("secret_report", async () => `${CANARY}:${"y".repeat(400 * 1024)}`);
const secretLarge = workflow("secret_large", async (ctx) => ({ size: (await secretReport(ctx)).length }));

const bigPart = activity("big_part", async () => "b".repeat(400 * 1024));
const smallPart = activity("small_part", async () => "s");
const twoParts = workflow("two_parts", async (ctx) => {
  const big = await bigPart(ctx);
  const small = await smallPart(ctx);
  return { big: big.length, small };
});

const chunk = activity("chunk_600k", async (_ctx, i: number) => `${i}`.padEnd(600 * 1024, "c"));
const chunks = workflow("five_chunks", async (ctx) => {
  const got: (number | string)[] = [];
  for (let i = 0; i < 5; i++) {
    try {
      got.push((await chunk(ctx, i)).length);
    } catch (err) {
      got.push(`${(err as Error).name}: ${(err as Error).message}`);
    }
  }
  return got;
});

const bigChild = workflow("big_child", async (ctx) => ({ text: await bigPart(ctx) }));
const bigParent = workflow("big_parent", async (ctx) => {
  const out = await invoke(ctx, bigChild, null);
  return { length: out.text.length };
});

let pg: { url: string; open(): Database };
const apps: TestApp[] = [];
const app = (extra: Partial<Parameters<typeof makeTestApp>[1]> = {}, database = pg.open()) => {
  const a = makeTestApp(database, { workflows: [largeReport, echo, tooLarge, secretLarge, twoParts, bigChild, bigParent, chunks], ...extra });
  apps.push(a);
  return a;
};
const post = (a: TestApp, path: string, body: unknown) => a.edda.fetch(new Request(`http://127.0.0.1${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
const get = (a: TestApp, path: string) => a.edda.fetch(new Request(`http://127.0.0.1${path}`));

/** The largest stored text of each kind of row the instance has. */
async function largestRows(db: Database, id: string) {
  const [r] = await queryRows<{ history: number | string | null; input: number | string; output: number | string | null; values: number | string; value_bytes: number | string | null }>(
    db.db,
    sql`SELECT (SELECT max(coalesce(octet_length(event_data), octet_length(event_data_binary))) FROM workflow_history WHERE instance_id = ${id}) AS history,
               (SELECT octet_length(input_data) FROM workflow_instances WHERE instance_id = ${id}) AS input,
               (SELECT octet_length(output_data) FROM workflow_instances WHERE instance_id = ${id}) AS output,
               (SELECT count(*) FROM workflow_payloads WHERE instance_id = ${id}) AS values,
               (SELECT max(size) FROM workflow_payloads WHERE instance_id = ${id}) AS value_bytes`,
  );
  return { history: Number(r!.history), input: Number(r!.input), output: Number(r!.output), values: Number(r!.values), valueBytes: Number(r!.value_bytes) };
}

async function largeReportThroughApi(a: TestApp, id: string): Promise<void> {
  expect((await post(a, "/workflows/large_report/instances", { instanceId: id, input: { sizeKiB: 5120, note: "q3" } })).status).toBe(201);
  await a.waitFor(id, ["completed", "failed"], 60_000);
  const res = await get(a, `/instances/${id}`);
  expect(res.status).toBe(200);
  const view = (await res.json()) as { status: string; output: { note: string; bytes: number; report: string } };
  expect(view.status).toBe("completed");
  expect(view.output.note).toBe("q3");
  expect(view.output.bytes).toBe(5 * MiB);
  expect(view.output.report.length).toBe(5 * MiB);
  const rows = await largestRows(a.database, id);
  expect(rows.history).toBeLessThanOrEqual(64 * 1024);
  expect(rows.output).toBeLessThanOrEqual(64 * 1024);
  expect(rows.values).toBe(2); // the activity's result and the output, once each
  expect(rows.valueBytes).toBeGreaterThan(5 * MiB);
}

beforeAll(async () => {
  pg = await freshPostgres("large_values");
});
afterAll(async () => {
  for (const a of apps) {
    await a.dispatcher.close();
    await a.database.close();
  }
});

describe("large values by reference on Postgres", () => {
  it("large_report returns a 5 MiB report through the API, with no history row over 64 KiB", { timeout: 90_000 }, async () => {
    await largeReportThroughApi(app(), "lr-pg");
  });

  it("the history view shows a value by reference by its size; the full history still holds it", { timeout: 60_000 }, async () => {
    const a = app();
    const engine = await engineOf(a.edda);
    const preview = await engine.storage.loadHistoryPreview("lr-pg", { afterId: 0, limit: 10, maxChars: 64 * 1024 });
    const result = preview.events.find((e) => e.activityId === "render_report:1");
    expect(result?.data).toBeNull();
    expect(result?.size).toBeGreaterThan(5 * MiB);
    const full = await engine.storage.loadHistory("lr-pg");
    const recorded = full.find((e) => e.activityId === "render_report:1");
    expect(recorded?.data.type === "json" && recorded.data.json.length).toBeGreaterThan(5 * MiB);
  });

  it("a 2 MiB input: 413 under the default 1 MiB body limit (nothing created), by reference once the limit is raised", { timeout: 60_000 }, async () => {
    const blob = "z".repeat(2 * MiB);
    const strict = app();
    const refused = await post(strict, "/workflows/echo_input/instances", { instanceId: "in-2m", input: { blob } });
    expect(refused.status).toBe(413);
    expect(((await refused.json()) as { error_type: string }).error_type).toBe("PayloadTooLarge");
    expect(await strict.edda.getInstance("in-2m")).toBeNull();

    const roomy = app({ maxBodyBytes: 4 * MiB });
    expect((await post(roomy, "/workflows/echo_input/instances", { instanceId: "in-2m", input: { blob } })).status).toBe(201);
    const done = await roomy.waitFor("in-2m", ["completed", "failed"], 30_000);
    expect(done.output).toEqual({ length: 2 * MiB });
    expect((done.input as { blob: string }).blob.length).toBe(2 * MiB);
    const rows = await largestRows(roomy.database, "in-2m");
    expect(rows.input).toBeLessThanOrEqual(64 * 1024);
    expect(rows.values).toBe(1);
    // A list page never loads values by reference: it shows the reference (the instance's own read resolves it).
    const list = (await (await get(roomy, "/instances?workflow=echo_input&include=payloads")).json()) as { instances: { instanceId: string; input: unknown }[] };
    expect(list.instances.find((i) => i.instanceId === "in-2m")?.input).toEqual({ $ref: expect.stringMatching(/^[0-9a-f-]{36}:\d+:[0-9a-f]{64}$/) as unknown });
  });

  it("an input over MAX_VALUE_BYTES in a body the limit lets through: 413 naming the value and the limit, nothing created", { timeout: 60_000 }, async () => {
    const roomy = app({ maxBodyBytes: 40 * MiB });
    const res = await post(roomy, "/workflows/echo_input/instances", { instanceId: "in-33m", input: { blob: "z".repeat(MAX_VALUE_BYTES) } });
    expect(res.status).toBe(413);
    const body = (await res.json()) as { error_type: string; detail: string; limit: number };
    expect(body).toMatchObject({ error_type: "PayloadTooLarge", limit: MAX_VALUE_BYTES });
    expect(body.detail).toMatch(/the input of workflow "echo_input" is 32\.0 MiB; the largest value Edda stores is 32 MiB/);
    expect(await roomy.edda.getInstance("in-33m")).toBeNull();
  });

  it("deleting an instance (retention) deletes its values by reference", { timeout: 60_000 }, async () => {
    const a = app();
    const engine = await engineOf(a.edda);
    expect((await largestRows(a.database, "lr-pg")).values).toBe(2);
    expect(await engine.storage.purgeFinishedInstances(0, 10, { onlyInstanceId: "lr-pg" })).toEqual(["lr-pg"]);
    const [left] = await queryRows<{ n: number | string }>(a.database.db, sql`SELECT count(*) AS n FROM workflow_payloads WHERE instance_id = 'lr-pg'`);
    expect(Number(left!.n)).toBe(0);
  });

  it("a fork owns copies of the values its copied history references: it finishes after its source is purged", { timeout: 60_000 }, async () => {
    const a = app();
    await a.edda.start("two_parts", null, { instanceId: "parts-1" });
    await a.waitFor("parts-1", ["completed"]);
    const res = await post(a, "/instances/parts-1/fork", { fromActivityId: "small_part:1" });
    expect(res.status, await res.clone().text()).toBe(201);
    const { instanceId } = (await res.json()) as { instanceId: string };
    expect((await largestRows(a.database, instanceId)).values).toBeGreaterThanOrEqual(1);
    const engine = await engineOf(a.edda);
    expect(await engine.storage.purgeFinishedInstances(0, 10, { onlyInstanceId: "parts-1" })).toEqual(["parts-1"]);
    const done = await a.waitFor(instanceId, ["completed", "failed"], 30_000);
    expect(done.output).toEqual({ big: 400 * 1024, small: "s" });
    // Read again after the purge: the fork's copied record resolves from the fork's own rows.
    const copied = (await engine.storage.loadHistory(instanceId)).find((e) => e.activityId === "big_part:1");
    expect(copied?.data.type === "json" && copied.data.json.length).toBeGreaterThan(400 * 1024);
  });

  it("a child's large output reaches its parent: recorded in the parent's history by a reference the parent owns, encrypted too", { timeout: 60_000 }, async () => {
    for (const [id, extra] of [["parent-plain", {}], ["parent-sealed", { encryptionKeys: toBase64(crypto.getRandomValues(new Uint8Array(32))) }]] as const) {
      const a = app(extra);
      await a.edda.start("big_parent", null, { instanceId: id });
      const done = await a.waitFor(id, ["completed", "failed"], 30_000);
      expect(done.output).toEqual({ length: 400 * 1024 });
      expect((await largestRows(a.database, id)).values).toBeGreaterThanOrEqual(1);
      expect((await largestRows(a.database, id)).history).toBeLessThanOrEqual(64 * 1024);
    }
  });

  it("a value over MAX_VALUE_BYTES fails its activity with PayloadTooLargeError naming the value and the limit, catchable in the workflow", { timeout: 60_000 }, async () => {
    const a = app();
    await a.edda.start("too_large", {}, { instanceId: "too-large" });
    const done = await a.waitFor("too-large", ["completed", "failed"], 60_000);
    expect(done.output).toMatchObject({ caught: "PayloadTooLargeError" });
    expect((done.output as { message: string }).message).toMatch(/the result of activity "huge_result" is 32\.0 MiB; the largest value Edda stores is 32 MiB/);
  });

  it("a result that would take an instance past maxInstanceBytes fails its activity with PayloadTooLargeError naming both; nothing of it is stored, other instances run on", { timeout: 60_000 }, async () => {
    const a = app({ largeValues: { maxInstanceBytes: 2 * MiB } });
    await a.edda.start("five_chunks", null, { instanceId: "chunks-2m" });
    const done = await a.waitFor("chunks-2m", ["completed", "failed"], 60_000);
    expect(done.status).toBe("completed");
    const got = done.output as (number | string)[];
    expect(got.slice(0, 3)).toEqual([600 * 1024, 600 * 1024, 600 * 1024]);
    for (const refused of got.slice(3)) {
      expect(refused).toMatch(/^PayloadTooLargeError: the result of activity "chunk_600k" is 0\.6 MiB and instance "chunks-2m" holds 1\.8 MiB already; one instance holds at most 2\.0 MiB/);
    }
    // The refused results are not stored: three values, and the history holds their failures.
    expect((await largestRows(a.database, "chunks-2m")).values).toBe(3);
    const failed = (done.history as { activityId: string; eventType: string }[]).filter((e) => e.eventType === "ActivityFailed").map((e) => e.activityId);
    expect(failed).toEqual(["chunk_600k:4", "chunk_600k:5"]);
    // Other traffic flows: another instance of the same workflow on the same app gets its own bound.
    await a.edda.start("two_parts", null, { instanceId: "after-bound" });
    expect((await a.waitFor("after-bound", ["completed", "failed"], 30_000)).output).toEqual({ big: 400 * 1024, small: "s" });
  });

  it("with a key set, a value by reference is stored encrypted: the canary is in the API's answer, not in pg_dump", { timeout: 60_000 }, async () => {
    const a = app({ encryptionKeys: toBase64(crypto.getRandomValues(new Uint8Array(32))) });
    await a.edda.start("secret_large", {}, { instanceId: "secret-large" });
    const done = await a.waitFor("secret-large", ["completed", "failed"], 30_000);
    expect(done.output).toEqual({ size: CANARY.length + 1 + 400 * 1024 });
    const history = JSON.stringify((await a.edda.getInstance("secret-large", { history: true }))?.history);
    expect(history).toContain(CANARY);
    expect((await largestRows(a.database, "secret-large")).values).toBe(1);
    const dump = execFileSync(join(findPostgresBin(), "pg_dump"), ["--no-owner", "--dbname", pg.url], { encoding: "utf8", maxBuffer: 512 * MiB });
    expect(dump).toContain("secret-large");
    expect(dump).not.toContain(CANARY);
  });
});

describe("large values by reference on Neon's driver (local WebSocket proxy)", () => {
  it("large_report returns a 5 MiB report through the API, with no history row over 64 KiB", { timeout: 120_000 }, async () => {
    await largeReportThroughApi(app({}, await openTestDatabase("neon", "lv_neon")), "lr-neon");
  });
});

describe("large values by reference on PGlite", () => {
  it("large_report returns a 5 MiB report through the API, with no history row over 64 KiB", { timeout: 120_000 }, async () => {
    await largeReportThroughApi(app({}, await openTestDatabase("pglite", "lv")), "lr-lite");
  });
});
