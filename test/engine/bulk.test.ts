// Bulk actions by filter on real Postgres: a bulk cancel of 2,000 queued
// instances, started on one engine whose connections are terminated and which
// is then shut down mid-operation, is finished by two other engines racing
// (their sweeps and direct drives): every instance is cancelled exactly once,
// by this operation, the counts add up, and the instance outside the filter
// is untouched. Dry runs count; refusals change nothing.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineOf } from "../../src/edda.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { queryRows } from "../../src/storage/database.ts";
import { waitMessage, workflow } from "../../src/index.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const gated = workflow("bk_gated", { input: z.object({ n: z.number() }), concurrency: { key: () => "all", limit: 1 }, }, async (ctx) => waitMessage(ctx, "bk-go"));

const waiter = workflow("bk_waiter", { input: z.object({ n: z.number() }) }, async (ctx) => waitMessage(ctx, "bk-go"));

const json = { "content-type": "application/json" };
const post = async (a: TestApp, path: string, body: unknown): Promise<Response> => a.edda.app.request(path, { method: "POST", headers: json, body: JSON.stringify(body) });

interface OperationView {
  operationId: string;
  status: string;
  total: number;
  done: number;
  skipped: number;
  failed: number;
}

describe("bulk operations on real Postgres", () => {
  const apps: TestApp[] = [];
  const cancelled: string[] = [];
  let url: string;
  beforeAll(async () => {
    const pg = await freshPostgres("bulk");
    url = pg.url;
    const hooks = { onWorkflowCancelled: (w: { instanceId: string }) => void cancelled.push(w.instanceId) };
    // The first engine's connections carry a name, so the test can terminate them.
    apps.push(makeTestApp(createPostgresJsDatabase({ url: `${url}${url.includes("?") ? "&" : "?"}application_name=bk_doomed`, max: 4 }), { workflows: [gated, waiter], hooks }));
    for (let i = 0; i < 2; i++) apps.push(makeTestApp(pg.open(), { workflows: [gated, waiter], hooks }));
  });
  afterAll(async () => {
    for (const a of apps.slice(1)) {
      await a.edda.close();
      await a.database.close();
    }
  });
  const db = () => apps[1]!.database.db;

  it("2,000 queued instances: bulk cancel with a worker killed mid-way finishes exactly once per instance", { timeout: 240_000 }, async () => {
    const holder = await apps[1]!.edda.start(gated, { n: -1 });
    await apps[1]!.waitFor(holder.instanceId, ["waiting_for_message"]);
    for (let i = 0; i < 2000; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, k) => apps[1 + (k % 2)]!.edda.start(gated, { n: i + k })));
    }
    const filter = { workflow: "bk_gated", status: ["queued"] };
    const dry = await post(apps[1]!, "/instances/bulk", { filter, action: "cancel", dryRun: true });
    expect(await dry.json()).toEqual({ dryRun: true, count: 2000 });

    const created = await post(apps[0]!, "/instances/bulk", { filter, action: "cancel", requestId: "cancel-2000" });
    expect(created.status).toBe(202);
    const op = (await created.json()) as OperationView;
    expect(op).toMatchObject({ operationId: "bulk-cancel-2000", status: "running", total: 2000 });
    const progress = async () => (await (await apps[1]!.edda.app.request(`/operations/${op.operationId}`)).json()) as OperationView;

    // The doomed engine works in its background; once it has committed some batches, kill it mid-operation.
    for (let p = await progress(); p.done < 100; p = await progress()) await new Promise((r) => setTimeout(r, 20));
    const killed = await queryRows<{ killed: boolean }>(db(), sql`SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = 'bk_doomed'`);
    expect(killed.length).toBeGreaterThan(0);
    await apps[0]!.edda.close();
    await apps[0]!.database.close().catch(() => undefined);
    const atKill = await progress();
    expect(atKill.status).toBe("running");
    expect(atKill.done).toBeLessThan(2000);

    // The same request again returns the same operation; the other two engines race to finish it.
    const again = await post(apps[2]!, "/instances/bulk", { filter, action: "cancel", requestId: "cancel-2000" });
    expect(again.status).toBe(200);
    expect(((await again.json()) as OperationView).operationId).toBe(op.operationId);
    await Promise.all(
      apps.slice(1).map(async (a, i) => {
        const engine = await engineOf(a.edda);
        while ((await progress()).status === "running") {
          if (i === 0) await a.edda.sweep({ bulkBatchSize: 25 });
          else await engine.driveBulk(op.operationId, { budgetMs: 2000, batchSize: 40 });
        }
      }),
    );

    const done = await progress();
    expect(done).toMatchObject({ status: "completed", total: 2000, done: 2000, skipped: 0, failed: 0 });
    const [byOp] = await queryRows<{ n: number }>(
      db(),
      sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'bk_gated' AND status = 'cancelled' AND (cancel_data::json ->> 'cancelled_by') = ${`bulk:${op.operationId}`}`,
    );
    expect(byOp!.n).toBe(2000);
    expect((await apps[1]!.edda.getInstance(holder.instanceId))!.status).toBe("waiting_for_message");
    // Hooks run after each batch's commit: never twice for one instance (a batch killed mid-way ran none of its own).
    expect(new Set(cancelled).size).toBe(cancelled.length);
    expect(cancelled.length).toBeLessThanOrEqual(2000);
    expect(cancelled.length).toBeGreaterThan(2000 - 50);

    // Valid traffic still flows: the holder takes its message and completes.
    await post(apps[1]!, `/instances/${holder.instanceId}/messages`, { channel: "bk-go", data: 1 });
    expect((await apps[1]!.waitFor(holder.instanceId)).status).toBe("completed");
  });

  it("bulk refusals: an unknown operation 404, nothing created (body refusals: test/http/repair-requests.unit.test.ts)", async () => {
    const count = async () => (await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM bulk_operations`))[0]!.n;
    const n = await count();
    expect((await apps[1]!.edda.app.request("/operations/bulk-nope")).status).toBe(404);
    expect(await count()).toBe(n);
    // a bulk rerun over finished instances makes one rerun each, linked, and a second drive adds none
    const r = await post(apps[1]!, "/instances/bulk", { filter: { workflow: "bk_gated", status: ["completed"] }, action: "rerun", requestId: "rerun-1" });
    const op = (await r.json()) as OperationView;
    expect(op.total).toBe(1);
    const engine = await engineOf(apps[2]!.edda);
    while ((await engine.bulkOperation(op.operationId))!.status === "running") await engine.driveBulk(op.operationId);
    expect(await engine.bulkOperation(op.operationId)).toMatchObject({ done: 1, failed: 0 });
    const reruns = await queryRows<{ n: number }>(db(), sql`SELECT count(*)::int AS n FROM workflow_instances WHERE origin_kind = 'rerun'`);
    expect(reruns[0]!.n).toBe(1);
  });

  // Regression: `"status": "waiting_for_message"` (one value, as `?status=` takes it) was refused with a union error.
  it("a filter's status is one value or several, as the list's ?status= takes it", async () => {
    const a = apps[1]!;
    const ids: string[] = [];
    for (const n of [1, 2]) {
      const r = await post(a, "/workflows/bk_waiter/instances", { input: { n } });
      ids.push(((await r.json()) as { instanceId: string }).instanceId);
    }
    for (const id of ids) await a.waitFor(id, ["waiting_for_message"]);
    const count = async (status: unknown) => {
      const r = await post(a, "/instances/bulk", { filter: { workflow: "bk_waiter", status }, action: "cancel", dryRun: true });
      expect(r.status).toBe(200);
      return ((await r.json()) as { count: number }).count;
    };
    const listed = (await (await a.edda.app.request("/instances?workflow=bk_waiter&status=waiting_for_message")).json()) as { instances: unknown[] };
    expect(await count("waiting_for_message")).toBe(listed.instances.length);
    expect(await count("waiting_for_message")).toBe(2);
    expect(await count(["waiting_for_message", "completed"])).toBe(2);
    expect(await count("completed")).toBe(0);
    const bad = await post(a, "/instances/bulk", { filter: { status: "waiting" }, action: "cancel", dryRun: true });
    expect(bad.status).toBe(422);

    const r = await post(a, "/instances/bulk", { filter: { workflow: "bk_waiter", status: "waiting_for_message" }, action: "cancel" });
    const op = (await r.json()) as OperationView & { filter: unknown };
    expect(op).toMatchObject({ total: 2, filter: { workflow: "bk_waiter", status: ["waiting_for_message"] } });
    const engine = await engineOf(a.edda);
    while ((await engine.bulkOperation(op.operationId))!.status === "running") await engine.driveBulk(op.operationId);
    for (const id of ids) expect((await a.edda.getInstance(id))!.status).toBe("cancelled");
  });
});
