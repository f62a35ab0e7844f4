// The typed client over real HTTP (a Node server on 127.0.0.1, real
// Postgres): every method against the app, result() long-polling on the
// database's LISTEN (a waiting instance costs a handful of statements, not a
// loop), bad input refused with nothing changed; and the server-side Edda
// client in per-request mode.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workflows } from "../../functions/workflows/index.ts";
import { createClient, EddaApiError, ResultTimeoutError } from "../../src/client/index.ts";
import { createEdda } from "../../src/edda.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";
import { serveTestApp, type Listening } from "../support/listen.ts";

const TOKEN = "client-token";
let t: TestApp;
let server: Listening;
let baseUrl: string;
let pg: { url: string; open(): Database };

beforeAll(async () => {
  pg = await freshPostgres("client");
  t = makeTestApp(pg.open(), { workflows, apiToken: TOKEN });
  server = await serveTestApp(t);
  baseUrl = server.url;
}, 120_000);
afterAll(() => server?.close());

const client = () => createClient<typeof workflows>({ baseUrl, token: TOKEN });
const count = async () => Number((await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_instances`))[0]!.n);

describe("createClient over HTTP", () => {
  it("start + result: the typed output of a completed pipeline", async () => {
    const run = await client().start("pipeline", { steps: 3 }, { instanceId: "c-pipe" });
    expect(run).toMatchObject({ instanceId: "c-pipe", created: true });
    const outcome = await run.result({ timeoutSeconds: 20 });
    expect(outcome.status).toBe("completed");
    if (outcome.status === "completed") expect(outcome.output.completed).toBe(3);
    // Starting the same id again returns the existing instance.
    expect((await client().start("pipeline", { steps: 3 }, { instanceId: "c-pipe" })).created).toBe(false);
  });

  it("result() waits on the database, not a loop: a waiting instance wakes on its message", async () => {
    const c = client();
    const run = await c.start("approval", { requestId: "r1", timeoutSeconds: 600 }, { instanceId: "c-appr" });
    await t.waitFor("c-appr", ["waiting_for_message"]);
    // Times out while nobody decides; the wait costs a few statements, not one per tick.
    const before = t.database.stats.statements;
    const t0 = Date.now();
    await expect(run.result({ timeoutSeconds: 1.5 })).rejects.toBeInstanceOf(ResultTimeoutError);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(t.database.stats.statements - before).toBeLessThanOrEqual(4);

    // A long wait returns as soon as the decision lands, well before its deadline.
    const waiting = c.result("c-appr", { timeoutSeconds: 60, workflow: "approval" });
    await new Promise((r) => setTimeout(r, 300));
    const sent = Date.now();
    await c.send("c-appr", "approval", { approved: true, approver: "ann" });
    const outcome = await waiting;
    expect(Date.now() - sent).toBeLessThan(5000);
    expect(outcome).toMatchObject({ status: "completed", output: { status: "approved", approver: "ann" } });
  });

  it("rerun, fork, bulk and schedule control reach the app, typed; refusals are EddaApiErrors", async () => {
    const c = client();
    const run = await c.start("pipeline", { steps: 2 }, { instanceId: "c-repair" });
    await run.result({ timeoutSeconds: 20 });
    const first = await c.rerun("c-repair", { requestId: "r1" });
    expect(first.created).toBe(true);
    expect(await c.rerun("c-repair", { requestId: "r1" })).toEqual({ ...first, created: false });
    expect((await c.get(first.instanceId))!.rerunOf).toBe("c-repair");
    const history = await c.history("c-repair");
    const forked = await c.fork("c-repair", history.history[0]!.activityId);
    expect(forked).toMatchObject({ created: true, copiedEvents: 0, webhooks: [] });
    expect((await c.result(forked.instanceId, { timeoutSeconds: 20 })).status).toBe("completed");
    await expect(c.fork("c-repair", "no_such:1")).rejects.toMatchObject({ status: 422 });
    expect(await c.bulkCount({ workflow: "pipeline", search: "c-repair" })).toBe(1);
    const op = await c.bulk({ workflow: "pipeline", search: "no-such-text" }, "cancel", { requestId: "c-bulk" });
    expect(op).toMatchObject({ operationId: "bulk-c-bulk", total: 0 });
    for (let i = 0; i < 100 && (await c.operation(op.operationId))!.status !== "completed"; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await c.operation(op.operationId)).toMatchObject({ status: "completed", done: 0 });
    expect(await c.operation("bulk-none")).toBeNull();
    expect((await c.pauseSchedule("daily_report")).pausedAt).not.toBeNull();
    const triggered = await c.triggerSchedule("daily_report", { requestId: "c-now" });
    expect(triggered.created).toBe(true);
    expect((await c.triggerSchedule("daily_report", { requestId: "c-now" })).created).toBe(false);
    expect((await c.resumeSchedule("daily_report")).pausedAt).toBeNull();
    expect((await c.schedules()).find((s) => s.workflow === "daily_report")!.pausedAt).toBeNull();
  });

  it("get, list, cancel, publish and sendEvent reach the app", async () => {
    const c = client();
    const run = await c.start("approval", { requestId: "r2", timeoutSeconds: 600 }, { instanceId: "c-cancel" });
    await t.waitFor(run.instanceId, ["waiting_for_message"]);
    expect((await c.get("c-cancel"))?.status).toBe("waiting_for_message");
    expect(await c.get("no-such-instance")).toBeNull();
    const page = await c.list({ workflow: "approval", status: ["waiting_for_message"], limit: 10 });
    expect(page.instances.map((i) => i.instanceId)).toContain("c-cancel");
    expect((await c.cancel("c-cancel")).status).toBe("cancelled");
    const cancelled = await c.result("c-cancel", { timeoutSeconds: 5 });
    expect(cancelled.status).toBe("cancelled");
    if (cancelled.status === "cancelled") expect(cancelled.cancellation.cancelled_by).toBe("api");

    const published = await c.publish("client-news", { hello: 1 });
    expect(published.messageId).toMatch(/.+/);

    // A CloudEvent targeted at a payment_wait instance completes it.
    await c.start("payment_wait", { orderId: "o-ce" }, { instanceId: "c-pay" });
    await t.waitFor("c-pay", ["waiting_for_message"]);
    const ev = await c.sendEvent({ type: "payment.completed", source: "test/client", id: "ce-1", data: { orderId: "o-ce", amount: 7 }, instanceId: "c-pay" });
    expect(ev).toMatchObject({ id: "ce-1", duplicate: false });
    expect((await c.sendEvent({ type: "payment.completed", source: "test/client", id: "ce-1", data: {} })).duplicate).toBe(true);
    expect(await c.result("c-pay", { timeoutSeconds: 20, workflow: "payment_wait" })).toMatchObject({ status: "completed" });
  });

  it("bad input is a typed error and creates nothing; the next request works", async () => {
    const before = await count();
    const c = client();
    const err = await c.start("pipeline", { steps: -1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EddaApiError);
    expect(err).toMatchObject({ status: 422, errorType: "ValidationError" });
    await expect(createClient({ baseUrl, token: "wrong" }).list()).rejects.toMatchObject({ status: 401 });
    await expect(c.result("nope", { timeoutSeconds: 1 })).rejects.toMatchObject({ status: 404 });
    const tooLong = await fetch(`${baseUrl}/instances/c-pipe/result?wait=31`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(tooLong.status).toBe(400);
    expect(await count()).toBe(before);
    expect((await (await c.start("pipeline", { steps: 1 })).result({ timeoutSeconds: 20 })).status).toBe("completed");
  });

  it("answers 202 with the status at the deadline, 200 once finished", async () => {
    const h = { authorization: `Bearer ${TOKEN}` };
    await client().start("approval", { requestId: "r3", timeoutSeconds: 600 }, { instanceId: "c-202" });
    await t.waitFor("c-202", ["waiting_for_message"]);
    const r = await fetch(`${baseUrl}/instances/c-202/result?wait=0.2`, { headers: h });
    expect(r.status).toBe(202);
    expect(await r.json()).toEqual({ instanceId: "c-202", workflowName: "approval", status: "waiting_for_message" });
    const done = await fetch(`${baseUrl}/instances/c-pipe/result`, { headers: h });
    expect(done.status).toBe(200);
    expect(await done.json()).toMatchObject({ status: "completed", output: { completed: 3 }, error: null });
  });
});

describe("the server-side Edda client in per-request mode (a database per call)", () => {
  it("start, getInstance, findInstances, result and cancel work and close their databases", async () => {
    const opened: Database[] = [];
    const edda = createEdda({
      workflows,
      database: () => {
        const d = createPostgresJsDatabase({ url: pg.url, max: 2 });
        opened.push(d);
        return d;
      },
      secret: "s",
      // No follow-up transport in this test: the run is driven by a long-lived app on the same database.
      dispatcher: { attach() {}, dispatch() {} },
    });
    const r = await edda.start("pipeline", { steps: 2 }, { instanceId: "pr-1" });
    expect(r).toMatchObject({ instanceId: "pr-1", created: true });
    expect((await edda.getInstance("pr-1"))?.workflowName).toBe("pipeline");
    expect((await edda.findInstances({ workflowName: "pipeline" })).instances.map((i) => i.instanceId)).toContain("pr-1");
    // The long-lived app runs it; the per-request result() sees it finish.
    await t.edda.sweep({ resumeIdleSeconds: 0 });
    const done = await edda.result("pr-1", { timeoutSeconds: 20 });
    expect(done?.status).toBe("completed");
    await edda.start("approval", { requestId: "pr", timeoutSeconds: 600 }, { instanceId: "pr-2" });
    await t.edda.sweep({ resumeIdleSeconds: 0 });
    await t.waitFor("pr-2", ["waiting_for_message"]);
    expect((await edda.cancel("pr-2")).status).toBe("cancelled");
    expect(opened.length).toBeGreaterThanOrEqual(6);
  });
});
