// The viewer's server side through app.request() on PGlite: hostile payloads
// render as text, a session serves the pages, cross-origin actions refused
// with nothing changed, the start form's validation, CSP. The login gate
// itself needs no database: viewer-login.unit.test.ts. The browser suite
// (test/ui/) drives the same pages in Chromium.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../../src/storage/database.ts";
import { approval } from "../../functions/workflows/approval.ts";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { jobWorker } from "../../functions/workflows/job-worker.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "viewer-token-0123456789";
const ORIGIN = "http://localhost";
const HOSTILE = `<script>alert("x")</script>"><img src=x onerror=alert(1)>`;
let t: TestApp;
let cookie = "";

const form = (fields: Record<string, string>, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, cookie, ...headers },
  body: new URLSearchParams(fields).toString(),
});
const page = (path: string, headers: Record<string, string> = {}) => t.edda.app.request(path, { headers: { cookie, ...headers } });

async function instanceCount(): Promise<number> {
  const [r] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_instances`);
  return Number(r!.n);
}

/** No markup from a payload survives: every `<` of it is escaped. */
function expectEscaped(html: string) {
  expect(html).not.toContain("<script>alert");
  expect(html).not.toContain("<img src=x");
  expect(html).toContain("&lt;script&gt;alert(");
}

beforeAll(async () => {
  const database = await openTestDatabase("pglite", "viewer");
  t = makeTestApp(database, { workflows: [orderSaga, approval, jobWorker], apiToken: TOKEN });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("login", () => {
  it("the right token's session serves the pages, and so does the API bearer token (the gate's refusals and cookie: viewer-login.unit.test.ts)", async () => {
    const ok = await t.edda.app.request("/ui/login", form({ token: TOKEN }));
    expect(ok.status).toBe(303);
    cookie = ok.headers.get("set-cookie")!.split(";")[0]!;
    expect((await page("/ui")).status).toBe(200);
    expect((await t.edda.app.request("/ui", { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
  });
});

describe("escaping", () => {
  it("renders hostile input, output, errors, channel names and messages as text", async () => {
    const r = await t.edda.app.request("/ui/workflows/order_saga/start", form({ "in.orderId": HOSTILE, "in.amount": "3", "in.failAt": "shipping", instanceId: "hostile-1" }));
    expect(r.status).toBe(303);
    await t.waitFor("hostile-1");
    const html = await (await page("/ui/instances/hostile-1")).text();
    expectEscaped(html);
    expect(html).toContain("no carrier available for &lt;script&gt;");
    expectEscaped(await (await page(`/ui?q=${encodeURIComponent(HOSTILE)}`)).text());

    const channel = `ch-${HOSTILE}`;
    expect((await t.edda.app.request("/ui/channels/publish", form({ channel, data: JSON.stringify(HOSTILE) }))).status).toBe(303);
    expectEscaped(await (await page("/ui/channels")).text());
    expectEscaped(await (await page(`/ui/channels/${encodeURIComponent(channel)}`)).text());
  });

  it("sends a CSP that admits only the page's own nonce", async () => {
    const r = await page("/ui");
    const csp = r.headers.get("content-security-policy")!;
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)![1]!;
    const html = await r.text();
    expect(html).toContain(`<script nonce="${nonce}">`);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(html.match(/<script/g)).toHaveLength(1);
  });
});

describe("actions", () => {
  it("refuses cross-origin and origin-less actions and changes nothing; a same-origin cancel works", async () => {
    await t.edda.start("approval", { requestId: "r", timeoutSeconds: 600 }, { instanceId: "appr-1" });
    await t.waitFor("appr-1", ["waiting_for_message"]);
    const attempts = [
      form({}, { origin: "https://evil.example" }),
      form({}, { origin: "", "sec-fetch-site": "cross-site" }),
      { method: "POST", headers: { cookie, "content-type": "application/x-www-form-urlencoded" }, body: "" },
    ];
    for (const init of attempts) {
      const r = await t.edda.app.request("/ui/instances/appr-1/cancel", init);
      expect(r.status).toBe(403);
    }
    expect((await t.edda.getInstance("appr-1"))!.status).toBe("waiting_for_message");
    // without a session, even a same-origin action is refused
    const anon = await t.edda.app.request("/ui/instances/appr-1/cancel", form({}, { cookie: "" }));
    expect(anon.status).toBe(401);
    expect((await t.edda.getInstance("appr-1"))!.status).toBe("waiting_for_message");

    const ok = await t.edda.app.request("/ui/instances/appr-1/cancel", form({}, { "sec-fetch-site": "same-origin", origin: "" }));
    expect(ok.status).toBe(303);
    expect(ok.headers.get("location")).toBe("/ui/instances/appr-1?notice=cancelled");
    expect((await t.edda.getInstance("appr-1"))!.status).toBe("cancelled");
    // cancelling again: 409 page, still cancelled
    const again = await t.edda.app.request("/ui/instances/appr-1/cancel", form({}));
    expect(again.status).toBe(409);
    expect((await t.edda.getInstance("appr-1"))!.cancellation).toMatchObject({ cancelled_by: "viewer" });
  });

  it("re-renders the start form with the schema's issues and the typed values, creating nothing", async () => {
    const before = await instanceCount();
    const r = await t.edda.app.request("/ui/workflows/order_saga/start", form({ "in.orderId": "keep-me", "in.amount": "-4", "in.failAt": "" }));
    expect(r.status).toBe(422);
    const html = await r.text();
    expect(html).toContain("amount");
    expect(html).toContain('value="keep-me"');
    const badJson = await t.edda.app.request("/ui/workflows/order_saga/start", form({ __json: "{nope" }));
    expect(badJson.status).toBe(422);
    expect(await instanceCount()).toBe(before);
    // a valid start from the raw JSON box still works afterwards
    const ok = await t.edda.app.request("/ui/workflows/order_saga/start", form({ __json: '{"orderId":"j1","amount":1}', instanceId: "json-1" }));
    expect(ok.status).toBe(303);
    expect((await t.waitFor("json-1")).output).toEqual({ orderId: "j1", status: "shipped" });
  });

  it("sends a message to a waiting instance, refusing bad JSON without sending", async () => {
    await t.edda.start("approval", { requestId: "r2", timeoutSeconds: 600 }, { instanceId: "appr-2" });
    await t.waitFor("appr-2", ["waiting_for_message"]);
    const bad = await t.edda.app.request("/ui/instances/appr-2/messages", form({ channel: "approval", data: "{approved:true" }));
    expect(bad.status).toBe(422);
    expect((await t.edda.getInstance("appr-2"))!.status).toBe("waiting_for_message");
    const ok = await t.edda.app.request("/ui/instances/appr-2/messages", form({ channel: "approval", data: '{"approved":true,"approver":"ui"}' }));
    expect(ok.status).toBe(303);
    expect((await t.waitFor("appr-2")).output).toEqual({ status: "approved", approver: "ui" });
  });

  it("shows the counts per status and filters by status and search", async () => {
    const html = await (await page("/ui?status=cancelled")).text();
    expect(html).toContain("appr-1");
    expect(html).not.toContain("json-1");
    const counts = [...html.matchAll(/data-status="(\w+)"><b>(\d+)<\/b>/g)].map((m) => [m[1], Number(m[2])]);
    expect(Object.fromEntries(counts)).toMatchObject({ cancelled: 1, completed: 2, failed: 1 });
    const search = await (await page("/ui?q=j1")).text();
    expect(search).toContain("json-1");
    expect(search).not.toContain("appr-2");
    // a broken cursor falls back to the first page with a note, not an error
    const broken = await page("/ui?cursor=garbage");
    expect(broken.status).toBe(200);
    expect(await broken.text()).toContain("no longer valid");
  });
});
