// The viewer's login gate (/ui), decided without the database: no session
// redirects to the login form (a token in the URL does nothing), a wrong
// token is a 401 with no cookie, the right one sets an HttpOnly, Secure,
// SameSite=Strict session cookie that does not carry the token, and a
// tampered cookie is no session. None of it asks the database for anything.
// What a session then serves: viewer.test.ts on PGlite.
import { afterAll, describe, expect, it } from "vitest";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { viewer } from "../../src/viewer.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const TOKEN = "viewer-token-0123456789";
const ORIGIN = "http://localhost";
const t = appWithoutDatabase({ workflows: [orderSaga], apiToken: TOKEN, viewer: viewer() });
afterAll(() => t.edda.close());

const form = (fields: Record<string, string>, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, ...headers },
  body: new URLSearchParams(fields).toString(),
});
const page = (path: string, headers: Record<string, string> = {}) => t.request(path, { headers });

describe("viewer login", () => {
  it("redirects to the login form without a session, and a token in the URL does nothing", async () => {
    const r = await page("/ui");
    expect(r.status).toBe(303);
    expect(r.headers.get("location")).toBe("/ui/login");
    const q = await page(`/ui?token=${TOKEN}`);
    expect(q.status).toBe(303);
    const login = await page("/ui/login");
    expect(login.status).toBe(200);
    expect(await login.text()).toContain('type="password"');
    expect(t.touched).toEqual([]);
  });

  it("refuses a wrong token (401, no cookie), sets a session cookie for the right one, and a tampered cookie is no session", async () => {
    const wrong = await t.request("/ui/login", form({ token: "nope" }));
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("set-cookie")).toBeNull();
    expect(await wrong.text()).toContain("That token is not valid.");
    const ok = await t.request("/ui/login", form({ token: TOKEN }));
    expect(ok.status).toBe(303);
    const setCookie = ok.headers.get("set-cookie")!;
    expect(setCookie).toMatch(/^edda_ui=/);
    for (const attr of ["HttpOnly", "Secure", "SameSite=Strict", "Path=/ui"]) expect(setCookie).toContain(attr);
    expect(setCookie).not.toContain(TOKEN);
    const [name, value] = setCookie.split(";")[0]!.split("=") as [string, string];
    const raw = decodeURIComponent(value);
    const tampered = `${name}=${encodeURIComponent(String(Number(raw.split(".")[0]) + 99999))}.${raw.split(".").slice(1).join(".")}`;
    expect((await page("/ui", { cookie: tampered })).status).toBe(303);
    expect((await page("/ui", { cookie: `${name}=garbage` })).status).toBe(303);
    // The JSON API does not accept the viewer's cookie.
    expect((await page("/instances", { cookie: setCookie.split(";")[0]! })).status).toBe(401);
    expect(t.touched).toEqual([]);
  });
});
