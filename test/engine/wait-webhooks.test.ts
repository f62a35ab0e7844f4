// Per-wait webhook URLs (createWebhook) on real Postgres through app.request():
// the approval_link example end to end (the link from its outbox event, one
// POST decides, the next is 410), a POST that comes before the wait, expiry
// through the sweep, cancellation, hostile calls that change nothing (valid
// traffic still flows and the sweep still succeeds afterwards), the token
// stored nowhere, the wait in the instance view and the viewer, and two
// engines taking concurrent POSTs to one URL: one wake.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { approvalLink } from "../../functions/workflows/approval-link.ts";
import { createEdda, type Edda } from "../../src/edda.ts";
import { LocalDispatcher } from "../../src/engine/dispatcher.ts";
import { activity, createWebhook, waitMessage, workflow, type WebhookDelivery } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const early = workflow("wh_early", async (ctx) => {
  const hook = await createWebhook(ctx, { id: "early" });
  await waitMessage(ctx, "go", { timeoutSeconds: 120 });
  return { path: hook.path, got: (await hook.wait()) as WebhookDelivery };
});
const once = workflow("wh_once", async (ctx) => {
  const hook = await createWebhook(ctx, { expiresIn: 600 });
  await waitMessage(ctx, "link", { timeoutSeconds: 1 }).catch(() => null);
  return (await hook.wait()).body;
});

const finish = activity("wh_finish", async (_ctx, body: unknown) => body);
const forkable = workflow("wh_forkable", async (ctx) => {
  const hook = await createWebhook(ctx, { expiresIn: 600 });
  const got = await hook.wait();
  return finish(ctx, got.body);
});

let db: Awaited<ReturnType<typeof freshPostgres>>;
let t: TestApp;
const post = async (app: Edda, path: string, body: string, headers: Record<string, string> = { "content-type": "application/json" }, method = "POST"): Promise<Response> =>
  app.app.request(`http://localhost${path}`, { method, headers, ...(method === "GET" ? {} : { body }) });

/** The link approval_link sent to its mailer (the outbox event's data). */
async function linkOf(instanceId: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const rows = await queryRows<{ payload: string }>(t.database.db, sql`SELECT event_data AS payload FROM outbox_events WHERE event_type = 'approval.link_requested' AND (event_data::json ->> 'requestId') = ${instanceId.replace(/^al-/, "req-")}`);
    if (rows[0]) return (JSON.parse(rows[0].payload) as { link: string }).link;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no link for ${instanceId}`);
}

beforeAll(async () => {
  db = await freshPostgres("wait_webhooks");
  t = makeTestApp(db.open(), { workflows: [approvalLink, early, once, forkable], publicUrl: "https://approvals.example" });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("createWebhook", () => {
  it("approval_link: the emailed link's first POST decides, a second one is 410 Gone, and the token is stored nowhere but the mail", async () => {
    await t.edda.start("approval_link", { requestId: "req-1", approver: "ana@example.com", expiresInSeconds: 600 }, { instanceId: "al-1" });
    const link = await linkOf("al-1");
    expect(link).toMatch(/^https:\/\/approvals\.example\/hooks\/[A-Za-z0-9_-]{43}$/);
    await t.waitFor("al-1", ["waiting_for_webhook"]);
    const view = await t.edda.getInstance("al-1");
    expect(view).toMatchObject({ status: "waiting_for_webhook", currentActivityId: "webhook:1:wait", webhooks: [{ id: "webhook:1", run: 1, status: "open", firedAt: null }] });
    const path = new URL(link).pathname;
    const token = path.slice("/hooks/".length);
    const res = await post(t.edda, path, JSON.stringify({ approved: true, by: "ana" }), { "content-type": "application/json", "x-request-id": "r-1", cookie: "s=1", authorization: "Bearer x" });
    expect(res.status, await res.text()).toBe(202);
    const done = await t.waitFor("al-1");
    expect(done.output).toEqual({ status: "approved", requestId: "req-1", by: "ana" });
    const again = await post(t.edda, path, JSON.stringify({ approved: false }));
    expect(again.status).toBe(410);
    expect(again.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(await again.json()).toMatchObject({ reason: "fired", status: 410, title: "Gone", error_type: "WebhookGone" });
    // The recorded request: body, the kept headers (never cookies or credentials), when it came.
    const [rec] = await queryRows<{ data: string }>(t.database.db, sql`SELECT event_data AS data FROM workflow_history WHERE instance_id = 'al-1' AND event_type = 'WebhookReceived'`);
    const delivery = JSON.parse(rec!.data) as WebhookDelivery;
    expect(delivery).toMatchObject({ body: { approved: true, by: "ana" }, contentType: "application/json", headers: { "content-type": "application/json", "x-request-id": "r-1" } });
    expect(Object.keys(delivery.headers)).not.toContain("cookie");
    expect(Object.keys(delivery.headers)).not.toContain("authorization");
    expect(Date.parse(delivery.receivedAt)).not.toBeNaN();
    // Only the token's hash is stored: no table but the mailer's outbox row holds the token.
    const holders = await queryRows<{ t: string }>(
      t.database.db,
      sql`SELECT 'history' AS t FROM workflow_history WHERE event_data LIKE ${`%${token}%`}
          UNION ALL SELECT 'webhooks' FROM workflow_webhooks WHERE token_hash LIKE ${`%${token}%`} OR payload LIKE ${`%${token}%`}
          UNION ALL SELECT 'instances' FROM workflow_instances WHERE coalesce(output_data, '') || input_data LIKE ${`%${token}%`}`,
    );
    expect(holders).toEqual([]);
    expect((await t.edda.getInstance("al-1"))!.webhooks).toMatchObject([{ id: "webhook:1", status: "fired" }]);
  });

  it("a POST before the wait begins is kept and taken when it does", async () => {
    await t.edda.start("wh_early", null, { instanceId: "early-1" });
    await t.waitFor("early-1", ["waiting_for_message"]);
    const [row] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_webhooks WHERE instance_id = 'early-1' AND status = 'open'`);
    expect(row!.n).toBe(1);
    // The path is rebuilt by replay from the nonce: reach it through a step that already returned it (the hook row proves it exists).
    const path = await pathFromReplay("early-1");
    const res = await post(t.edda, path, "plain text body", { "content-type": "text/plain", "user-agent": "curl/8" });
    expect(res.status).toBe(202);
    expect((await t.edda.getInstance("early-1"))!.status).toBe("waiting_for_message");
    await t.edda.publish("go", null, { targetInstanceId: "early-1" });
    const done = await t.waitFor("early-1");
    expect(done.output).toMatchObject({ path, got: { body: "plain text body", contentType: "text/plain", headers: { "user-agent": "curl/8" } } });
  });

  it("expires through the sweep (the wait ends WebhookExpiredError → 'expired'), and an expired link is 410", async () => {
    await t.edda.start("approval_link", { requestId: "req-2", approver: "bo@example.com", expiresInSeconds: 0.5 }, { instanceId: "al-2" });
    const path = new URL(await linkOf("al-2")).pathname;
    await t.waitFor("al-2", ["waiting_for_webhook", "completed"]);
    await new Promise((r) => setTimeout(r, 700));
    const report = await t.edda.sweep();
    expect(report.failures).toEqual([]);
    const done = await t.waitFor("al-2");
    expect(done.output).toEqual({ status: "expired", requestId: "req-2" });
    const late = await post(t.edda, path, JSON.stringify({ approved: true }));
    expect(late.status).toBe(410);
    expect(await late.json()).toMatchObject({ reason: "expired" });
  });

  it("a cancelled instance's link is 410 (cancelled)", async () => {
    await t.edda.start("approval_link", { requestId: "req-3", approver: "cy@example.com" }, { instanceId: "al-3" });
    const path = new URL(await linkOf("al-3")).pathname;
    await t.waitFor("al-3", ["waiting_for_webhook"]);
    await t.edda.cancel("al-3");
    const res = await post(t.edda, path, JSON.stringify({ approved: true }));
    expect(res.status).toBe(410);
    expect(await res.json()).toMatchObject({ reason: "cancelled" });
    expect((await t.edda.getInstance("al-3"))!.status).toBe("cancelled");
  });

  it("hostile calls change nothing: unknown and malformed tokens 404, wrong method 404, huge body 413, bad JSON 400; then the valid POST still wakes it and the sweep succeeds", async () => {
    await t.edda.start("approval_link", { requestId: "req-4", approver: "di@example.com" }, { instanceId: "al-4" });
    const path = new URL(await linkOf("al-4")).pathname;
    await t.waitFor("al-4", ["waiting_for_webhook"]);
    const hostile: [string, Promise<Response>, number][] = [
      ["unknown token", post(t.edda, `/hooks/${"A".repeat(43)}`, "{}"), 404],
      ["malformed token", post(t.edda, "/hooks/..%2F..%2Fetc", "{}"), 404],
      ["short token", post(t.edda, path.slice(0, -1), "{}"), 404],
      ["wrong method", post(t.edda, path, "", {}, "GET"), 404],
      ["put", post(t.edda, path, "{}", { "content-type": "application/json" }, "PUT"), 404],
      ["huge body", post(t.edda, path, JSON.stringify({ pad: "x".repeat(2 * 1024 * 1024) })), 413],
      ["bad json", post(t.edda, path, "{not json"), 400],
      ["deep json", post(t.edda, path, "[".repeat(5000) + "]".repeat(5000)), 400],
    ];
    for (const [what, res, status] of hostile) expect((await res).status, what).toBe(status);
    const still = await t.edda.getInstance("al-4");
    expect(still).toMatchObject({ status: "waiting_for_webhook", webhooks: [{ status: "open" }] });
    const sweep = await t.edda.sweep();
    expect(sweep.failures).toEqual([]);
    expect(sweep.rowFailures).toEqual([]);
    expect((await post(t.edda, path, JSON.stringify({ approved: false }))).status).toBe(202);
    expect((await t.waitFor("al-4")).output).toEqual({ status: "rejected", requestId: "req-4", by: "di@example.com" });
  });

  it("a body with tag-like and prototype keys reaches the wait exactly as sent (regression: it was stored without the history's escaping)", async () => {
    await t.edda.start("wh_once", null, { instanceId: "tags-1" });
    await t.waitFor("tags-1", ["waiting_for_webhook"]);
    const raw = '{"$date":"2020-01-01T00:00:00.000Z","$bytes":"AAAA","$$":{"$undefined":1},"__proto__":{"polluted":true}}';
    expect((await post(t.edda, await pathFromReplay("tags-1"), raw)).status).toBe(202);
    expect(JSON.stringify((await t.waitFor("tags-1")).output)).toBe(raw);
  });

  it("the viewer shows the wait on the instance page", async () => {
    await t.edda.start("approval_link", { requestId: "req-5", approver: "ed@example.com" }, { instanceId: "al-5" });
    await t.waitFor("al-5", ["waiting_for_webhook"]);
    const page = await (await t.edda.app.request("http://localhost/ui/instances/al-5")).text();
    expect(page).toContain("a POST to its webhook URL");
    expect(page).toContain("createWebhook at webhook:1");
    expect(page).not.toMatch(/\/hooks\/[A-Za-z0-9_-]{43}/);
    await t.edda.cancel("al-5");
  });
});

describe("fork of an instance whose history created a webhook", () => {
  const fork = async (app: Edda, id: string, fromActivityId: string) => {
    const res = await post(app, `/instances/${id}/fork`, JSON.stringify({ fromActivityId }));
    return { status: res.status, body: (await res.json()) as { instanceId: string; copiedEvents: number; webhooks: { id: string; url: string; status: string; expiresAt: string | null }[]; detail?: string } };
  };
  const links = async (requestId: string) =>
    (await queryRows<{ payload: string }>(t.database.db, sql`SELECT event_data AS payload FROM outbox_events WHERE event_type = 'approval.link_requested' AND (event_data::json ->> 'requestId') = ${requestId} ORDER BY created_at`)).map(
      (r) => (JSON.parse(r.payload) as { link: string }).link,
    );

  it("gets a hook of its own under its own URL (listed in the response, mailed again from the fork point); the original's URL never reaches it", async () => {
    await t.edda.start("approval_link", { requestId: "req-f1", approver: "fa@example.com", expiresInSeconds: 600 }, { instanceId: "al-f1" });
    await t.waitFor("al-f1", ["waiting_for_webhook"]);
    await t.edda.cancel("al-f1");
    const original = (await links("req-f1"))[0]!;
    const f = await fork(t.edda, "al-f1", "request_approval_email:1");
    expect(f.status, f.body.detail).toBe(201);
    const [hook] = f.body.webhooks;
    expect(f.body.webhooks).toHaveLength(1);
    expect(hook).toMatchObject({ id: "webhook:1", status: "open" });
    expect(hook!.url).toMatch(/^https:\/\/approvals\.example\/hooks\/[A-Za-z0-9_-]{43}$/);
    expect(hook!.url).not.toBe(original);
    await t.waitFor(f.body.instanceId, ["waiting_for_webhook"]);
    // The fork's replay derived the same URL the response lists: the mail sent again from the fork point carries it.
    expect((await links("req-f1"))[1]).toBe(hook!.url);
    const view = await t.edda.getInstance(f.body.instanceId);
    expect(view!.webhooks).toMatchObject([{ id: "webhook:1", status: "open", expiresAt: hook!.expiresAt }]);
    expect((await post(t.edda, new URL(original).pathname, JSON.stringify({ approved: true }))).status).toBe(410);
    expect((await post(t.edda, new URL(hook!.url).pathname, JSON.stringify({ approved: true, by: "fork" }))).status).toBe(202);
    expect((await t.waitFor(f.body.instanceId)).output).toEqual({ status: "approved", requestId: "req-f1", by: "fork" });
    // The same request again (no request id: a new fork) lists its own URL; a fork from the creation gets a fresh hook, so none is listed.
    const fresh = await fork(t.edda, "al-f1", "webhook:1");
    expect(fresh.body.webhooks).toEqual([]);
    await t.waitFor(fresh.body.instanceId, ["waiting_for_webhook"]);
    expect((await t.edda.getInstance(fresh.body.instanceId))!.webhooks).toMatchObject([{ id: "webhook:1", status: "open" }]);
    await t.edda.cancel(fresh.body.instanceId);
  });

  it("a hook whose wait ended in the prefix keeps that outcome: the fork replays the delivery and its URL is 410 fired", async () => {
    await t.edda.start("wh_forkable", null, { instanceId: "fk-1" });
    await t.waitFor("fk-1", ["waiting_for_webhook"]);
    expect((await post(t.edda, await pathFromReplay("fk-1"), JSON.stringify({ n: 1 }))).status).toBe(202);
    expect((await t.waitFor("fk-1")).output).toEqual({ n: 1 });
    const f = await fork(t.edda, "fk-1", "wh_finish:1");
    expect(f.status).toBe(201);
    expect(f.body.webhooks).toMatchObject([{ id: "webhook:1", status: "fired" }]);
    expect((await t.waitFor(f.body.instanceId)).output).toEqual({ n: 1 });
    const late = await post(t.edda, new URL(f.body.webhooks[0]!.url, "http://localhost").pathname, JSON.stringify({ n: 2 }));
    expect(late.status).toBe(410);
    expect(await late.json()).toMatchObject({ reason: "fired" });
  });

  it("an app without EDDA_SECRET refuses such a fork with a 409 naming why (and forks from before the creation)", async () => {
    const bare = createEdda({ workflows: [approvalLink, early, once, forkable], database: db.open(), dispatcher: new LocalDispatcher({ concurrency: 2 }) });
    try {
      const refused = await fork(bare, "fk-1", "wh_finish:1");
      expect(refused.status).toBe(409);
      expect(refused.body.detail).toMatch(/createWebhook at webhook:1.*EDDA_SECRET/);
      expect((await fork(bare, "fk-1", "webhook:1")).status).toBe(201);
    } finally {
      await bare.close();
    }
  });
});

describe("createWebhook under concurrency", () => {
  it("two engines, 16 concurrent POSTs to one URL: exactly one 202 and one wake, the rest 410", async () => {
    const second = createEdda({ workflows: [approvalLink, early, once], database: db.open(), dispatcher: new LocalDispatcher({ concurrency: 4 }), secret: "test-secret" });
    try {
      await t.edda.start("wh_once", null, { instanceId: "race-1" });
      await t.waitFor("race-1", ["waiting_for_webhook"]);
      const path = await pathFromReplay("race-1");
      const results = await Promise.all(Array.from({ length: 16 }, (_, i) => post(i % 2 ? second : t.edda, path, JSON.stringify({ n: i }))));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 202)).toHaveLength(1);
      expect(statuses.filter((s) => s === 410)).toHaveLength(15);
      const done = await t.waitFor("race-1");
      const winner = results.findIndex((r) => r.status === 202);
      expect(done.output).toEqual({ n: winner });
      const [rows] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_history WHERE instance_id = 'race-1' AND event_type = 'WebhookReceived'`);
      expect(rows!.n).toBe(1);
    } finally {
      await second.close();
    }
  });
});

/**
 * The URL of an instance's hook, as its workflow sees it: a replay of its
 * history with the app's key (the same derivation the step uses), since
 * these workflows do not send their links anywhere.
 */
async function pathFromReplay(instanceId: string): Promise<string> {
  const { webhookToken } = await import("../../src/core/webhook-waits.ts");
  const [row] = await queryRows<{ data: string; activity_id: string }>(
    t.database.db,
    sql`SELECT event_data AS data, activity_id FROM workflow_history WHERE instance_id = ${instanceId} AND event_data LIKE '%"edda.create_webhook"%'`,
  );
  const { result } = JSON.parse(row!.data) as { result: { nonce: string } };
  return `/hooks/${await webhookToken("test-secret", instanceId, row!.activity_id, result.nonce)}`;
}

