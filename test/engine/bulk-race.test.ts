// Bulk operations under abuse (issue 42), on real Postgres with several
// engines racing: a requestId reused with another filter or action is a 409
// naming the operation, and changes nothing; two identical bulk cancels
// created at once over 20,001 waiting instances, each driven by two engines
// at the same time, cancel every instance exactly once and count it exactly
// once between them (in the operation that cancelled it), and each
// operation's done + skipped + failed adds up to its total. Valid traffic
// flows after, and the sweep succeeds.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineOf } from "../../src/edda.ts";
import { queryRows } from "../../src/storage/database.ts";
import { waitMessage, workflow } from "../../src/index.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const waits = workflow("bkr_wait", async (ctx) => (await waitMessage(ctx, "bkr-go")).data);
const other = workflow("bkr_other", async (ctx) => (await waitMessage(ctx, "bkr-go")).data);

const json = { "content-type": "application/json" };
const post = async (a: TestApp, path: string, body: unknown): Promise<Response> => a.edda.app.request(path, { method: "POST", headers: json, body: JSON.stringify(body) });

interface OperationView {
  operationId: string;
  status: string;
  total: number;
  done: number;
  skipped: number;
  failed: number;
  filter: unknown;
}

const apps: TestApp[] = [];
const db = () => apps[0]!.database.db;
const count = async (q: ReturnType<typeof sql>) => (await queryRows<{ n: number }>(db(), q))[0]!.n;

beforeAll(async () => {
  const pg = await freshPostgres("bulk_race");
  for (let i = 0; i < 2; i++) apps.push(makeTestApp(pg.open(), { workflows: [waits, other] }));
});
afterAll(async () => {
  for (const a of apps) {
    await a.edda.close();
    await a.database.close();
  }
});

describe("bulk operations: idempotent and honest (issue 42)", () => {
  it("a requestId reused with another filter or action: 409 naming the operation, nothing changed; the same request again: 200, the same operation", async () => {
    const a = apps[0]!;
    await a.edda.start(other, undefined, { instanceId: "bkr-other-1" });
    await a.waitFor("bkr-other-1", ["waiting_for_message"]);
    const first = await post(a, "/instances/bulk", { filter: { workflow: "bkr_other", status: ["completed", "failed"] }, action: "rerun", requestId: "reuse-1" });
    expect(first.status).toBe(202);
    const op = (await first.json()) as OperationView;
    const ops = () => count(sql`SELECT count(*)::int AS n FROM bulk_operations`);
    const before = await ops();

    const otherFilter = await post(a, "/instances/bulk", { filter: { workflow: "bkr_other", status: ["waiting_for_message"] }, action: "rerun", requestId: "reuse-1" });
    expect(otherFilter.status).toBe(409);
    expect(otherFilter.headers.get("content-type")).toBe("application/problem+json");
    const problem = (await otherFilter.json()) as { error_type: string; detail: string };
    expect(problem.error_type).toBe("ConflictError");
    expect(problem.detail).toContain(op.operationId);
    const otherAction = await post(a, "/instances/bulk", { filter: { workflow: "bkr_other", status: ["completed", "failed"] }, action: "cancel", requestId: "reuse-1" });
    expect(otherAction.status).toBe(409);
    expect(((await otherAction.json()) as { detail: string }).detail).toContain(op.operationId);
    expect(await ops()).toBe(before);
    expect((await a.edda.getInstance("bkr-other-1"))!.status).toBe("waiting_for_message"); // the 409s cancelled nothing

    // The same request (statuses in another order are the same filter) is a retry: the operation, 200.
    const again = await post(a, "/instances/bulk", { filter: { status: ["failed", "completed"], workflow: "bkr_other" }, action: "rerun", requestId: "reuse-1" });
    expect(again.status).toBe(200);
    expect(((await again.json()) as OperationView).operationId).toBe(op.operationId);

    // Two creates of one new request id racing with different filters: one operation, the other request 409.
    const racing = await Promise.all([
      post(apps[0]!, "/instances/bulk", { filter: { workflow: "bkr_other", status: ["completed"] }, action: "rerun", requestId: "reuse-race" }),
      post(apps[1]!, "/instances/bulk", { filter: { workflow: "bkr_other", status: ["failed"] }, action: "rerun", requestId: "reuse-race" }),
    ]);
    expect(racing.map((r) => r.status).sort()).toEqual([202, 409]);
    expect(await ops()).toBe(before + 1);
  });

  it("two identical bulk cancels racing over 20,001 instances: each instance cancelled once and counted once between them; each operation adds up", { timeout: 600_000 }, async () => {
    const a = apps[0]!;
    await a.edda.start(waits, undefined, { instanceId: "bkr-template" });
    await a.waitFor("bkr-template", ["waiting_for_message"]);
    // 20,000 more rows like the real one (its copies, one statement), so the race is over a real-sized set.
    await db().execute(sql`
      INSERT INTO workflow_instances
      SELECT (jsonb_populate_record(t, jsonb_build_object('instance_id', 'bkr-' || lpad(g::text, 5, '0')))).*
      FROM workflow_instances t, generate_series(1, 20000) g WHERE t.instance_id = 'bkr-template'`);
    const filter = { workflow: "bkr_wait", status: ["waiting_for_message"] };
    expect(await (await post(a, "/instances/bulk", { filter, action: "cancel", dryRun: true })).json()).toEqual({ dryRun: true, count: 20001 });

    // Created at once, no requestId: two operations over the same instances.
    const created = await Promise.all(apps.map((x) => post(x, "/instances/bulk", { filter, action: "cancel" })));
    const ops = (await Promise.all(created.map((r) => r.json()))) as OperationView[];
    expect(created.map((r) => r.status)).toEqual([202, 202]);
    expect(ops[0]!.operationId).not.toBe(ops[1]!.operationId);

    // Each operation driven by both engines at once (besides the creating requests' own background drives).
    const view = async (id: string) => (await (await a.edda.app.request(`/operations/${id}`)).json()) as OperationView;
    await Promise.all(
      apps.flatMap((x) =>
        ops.map(async (op) => {
          const engine = await engineOf(x.edda);
          while ((await view(op.operationId)).status === "running") await engine.driveBulk(op.operationId, { budgetMs: 5000, batchSize: 200 });
        }),
      ),
    );

    const ends = await Promise.all(ops.map((op) => view(op.operationId)));
    console.log("bulk race:", ends.map(({ operationId, total, done, skipped, failed }) => ({ operationId, total, done, skipped, failed })));
    for (const end of ends) {
      expect(end.status).toBe("completed");
      expect(end.done + end.skipped + end.failed).toBe(end.total);
      expect(end.failed).toBe(0);
    }
    // Counted once between them: every instance is in exactly one operation's counts, as the one that cancelled it.
    expect(ends[0]!.total + ends[1]!.total).toBe(20001);
    expect(ends[0]!.done + ends[1]!.done).toBe(20001);
    for (const [i, op] of ops.entries()) {
      const byOp = await count(sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'bkr_wait' AND status = 'cancelled' AND (cancel_data::json ->> 'cancelled_by') = ${`bulk:${op.operationId}`}`);
      expect(byOp).toBe(ends[i]!.done);
    }
    expect(await count(sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'bkr_wait' AND status <> 'cancelled'`)).toBe(0);
    expect(await count(sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'bkr_wait' AND locked_by IS NOT NULL`)).toBe(0);

    // Valid traffic flows: the instance outside the filter takes its message, and the sweep runs clean.
    await a.edda.publish("bkr-go", "went", { targetInstanceId: "bkr-other-1" });
    expect((await a.waitFor("bkr-other-1")).output).toBe("went");
    const report = await apps[1]!.edda.sweep();
    expect(report).toBeTypeOf("object");
  });
});
