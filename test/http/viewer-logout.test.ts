// Logging out of the viewer revokes the session server-side, on real
// Postgres: a copy of the cookie taken before logout stops working (GET pages
// and actions alike), another session of the same token keeps working, a
// cookie of the older format (an expiry alone, no id) is refused, a forged
// logout revokes nothing, and the sweep deletes revocations once their
// session has expired anyway. Valid viewer traffic and sweeps still succeed.
import { createHmac } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../../src/storage/database.ts";
import { activity, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "logout-token-0123456789";
const ORIGIN = "http://localhost";
const step = activity("vl_step", async () => "done");
const job = workflow("vl_job", async (ctx) => step(ctx));
let t: TestApp;

beforeAll(async () => {
  const database = await openTestDatabase("postgres-js", "viewer_logout");
  t = makeTestApp(database, { workflows: [job], apiToken: TOKEN, secret: "logout-secret" });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

const req = (path: string, init: RequestInit = {}) => t.edda.app.request(new Request(`http://localhost${path}`, init));
const post = (path: string, cookie: string, fields: Record<string, string> = {}) =>
  req(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, cookie }, body: new URLSearchParams(fields).toString() });

async function login(): Promise<string> {
  const r = await post("/ui/login", "", { token: TOKEN });
  expect(r.status).toBe(303);
  return r.headers.get("set-cookie")!.split(";")[0]!;
}
const viewerStatus = async (cookie: string) => (await req("/ui", { headers: { cookie } })).status;
const revocations = async () => Number((await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM viewer_session_revocations`))[0]!.n);

/** A cookie hono would accept as signed by the viewer's key (value.base64(HMAC-SHA256)). */
function signedCookie(value: string): string {
  const key = `edda-ui-session\u0000logout-secret\u0000${TOKEN}`;
  const mac = createHmac("sha256", key).update(value).digest("base64");
  return `edda_ui=${encodeURIComponent(`${value}.${mac}`)}`;
}

describe("viewer logout", () => {
  it("revokes the session server-side: a copied cookie stops working, another session does not", async () => {
    const copied = await login();
    const other = await login();
    expect(copied).not.toBe(other);
    expect(await viewerStatus(copied)).toBe(200);

    const out = await post("/ui/logout", copied);
    expect(out.status).toBe(303);
    expect(out.headers.get("set-cookie")).toMatch(/^edda_ui=;/); // the browser's copy is deleted
    expect(await revocations()).toBe(1);

    // The copy taken before logout: pages redirect to the login, actions are refused, nothing starts.
    expect(await viewerStatus(copied)).toBe(303);
    const action = await post("/ui/workflows/vl_job/start", copied, { input: "null" });
    expect(action.status).toBe(401);
    expect(Number((await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_instances`))[0]!.n)).toBe(0);

    // The other session of the same token still works, and its actions still run.
    expect(await viewerStatus(other)).toBe(200);
    expect((await req("/ui/instances/none", { headers: { cookie: other } })).status).toBe(404);
    // Logging out twice revokes once.
    await post("/ui/logout", copied);
    expect(await revocations()).toBe(1);
  });

  it("refuses a cookie of the older format and revokes nothing for a forged one", async () => {
    const future = Math.floor(Date.now() / 1000) + 3600;
    expect(await viewerStatus(signedCookie(String(future)))).toBe(303); // signed, unexpired, but no session id
    const before = await revocations();
    await post("/ui/logout", `edda_ui=${"a".repeat(32)}.${future}.forged`);
    expect(await revocations()).toBe(before);
    // A well-formed, correctly signed session value is accepted (the helper signs as the viewer does).
    expect(await viewerStatus(signedCookie(`${"b".repeat(32)}.${future}`))).toBe(200);
  });

  it("the sweep deletes revocations whose session has expired, and keeps the others", async () => {
    const live = await login();
    await post("/ui/logout", live);
    await t.database.db.execute(sql`INSERT INTO viewer_session_revocations (session_id, expires_at) VALUES ('expired-one', now() - interval '1 second')`);
    const before = await revocations();
    const report = await t.edda.sweep();
    expect(report.failures).toEqual([]);
    expect(report.sessionRevocationsPurged).toBe(1);
    expect(await revocations()).toBe(before - 1);
    expect(await viewerStatus(live)).toBe(303); // still revoked: its row outlives nothing it guards

    // Valid traffic after: a new login works and the API runs a workflow.
    expect(await viewerStatus(await login())).toBe(200);
    const started = await req("/workflows/vl_job/instances", { method: "POST", headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body: JSON.stringify({ instanceId: "vl-after" }) });
    expect(started.status).toBe(201);
    expect((await t.waitFor("vl-after")).output).toBe("done");
  });
});
