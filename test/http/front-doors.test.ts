// Open mode (no API token, the `npm start` default) against requests another
// origin can make, through app.request() on real Postgres: JSON routes answer
// 415 to the "simple" content types a page sends without a CORS preflight;
// only loopback and configured Host values are served (DNS rebinding); a
// browser Origin that is not a configured host is refused on the API, on MCP
// and on viewer actions — even when it equals the request's own Host. Each
// refusal changes no row, and valid traffic flows afterwards. The same doors
// from a real cross-origin page: test/ui/cross-origin.browser.test.ts. The
// Host guard and the bearer-token throttle, which need no database:
// open-mode.unit.test.ts and credential-throttle.unit.test.ts.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { mcp } from "../../src/mcp.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import type { AddressInfo } from "node:net";
import { serve, type ServerType } from "@hono/node-server";

const step = activity("fd_step", async (_ctx, v: unknown) => v);
const echo = workflow("fd_echo", async (ctx, input: unknown) => step(ctx, input));
const HOST = "127.0.0.1:8787";

let open: TestApp;
let guarded: TestApp;

beforeAll(async () => {
  const database = await openTestDatabase("postgres-js", "front_doors");
  open = makeTestApp(database, { workflows: [echo], mcp: mcp(), allowedHosts: [HOST, "edda.internal"] });
  guarded = makeTestApp(database, { workflows: [echo], mcp: mcp(), apiToken: "fd-token", allowedHosts: [HOST] });
});
afterAll(async () => {
  await open.edda.close();
  await guarded.edda.close();
  await open.database.close();
});

async function rows(): Promise<number> {
  await open.dispatcher.idle(); // accepted starts finish first: only a refusal may not change the count
  await new Promise((r) => setTimeout(r, 20));
  await open.dispatcher.idle();
  const [r] = await queryRows<{ n: number }>(open.database.db, sql`SELECT (SELECT count(*) FROM workflow_instances)::int + (SELECT count(*) FROM workflow_history)::int AS n`);
  return Number(r!.n);
}

const req = (app: TestApp, path: string, init: RequestInit & { host?: string } = {}) => {
  const { host = HOST, ...rest } = init;
  return app.edda.app.request(new Request(`http://${host}${path}`, rest));
};
const start = (headers: Record<string, string>, body: BodyInit = JSON.stringify({ input: 1 }), host?: string) =>
  req(open, "/workflows/fd_echo/instances", { method: "POST", headers, body, ...(host ? { host } : {}) });

describe("open mode against other origins", () => {
  it("JSON content types and none at all start an instance (the 415s for the others: content-types.unit.test.ts)", async () => {
    expect((await start({ "content-type": "application/json; charset=utf-8" })).status).toBe(201);
    expect((await start({ "content-type": "application/merge-patch+json" })).status).toBe(201);
    // No Content-Type at all (bytes: a string body would get text/plain): a non-browser client.
    expect((await start({}, new TextEncoder().encode(JSON.stringify({ input: 1 })))).status).toBe(201);
  });

  it("refuses writes from a browser origin that is not a configured host, even one equal to the request's Host", async () => {
    const before = await rows();
    const json = { "content-type": "application/json" };
    for (const origin of ["http://localhost:9999", "https://evil.example", "null", "http://127.0.0.1:8788"]) {
      expect((await start({ ...json, origin })).status, origin).toBe(403);
      expect((await req(open, "/instances/x/cancel", { method: "POST", headers: { origin } })).status, origin).toBe(403);
    }
    const init = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    const mcpHeaders = { ...json, accept: "application/json, text/event-stream" };
    // MCP: the origin is checked against the configured hosts, not the Host the request names.
    const rebound = await req(guarded, "/mcp", { method: "POST", host: "evil.example:8787", headers: { ...mcpHeaders, authorization: "Bearer fd-token", origin: "http://evil.example:8787" }, body: init });
    expect(rebound.status).toBe(403);
    const foreign = await req(open, "/mcp", { method: "POST", headers: { ...mcpHeaders, origin: "http://localhost:9999" }, body: init });
    expect(foreign.status).toBe(403);
    // Viewer actions: an Origin equal to the (rebound) Host is not enough.
    const viewerPost = await req(open, "/ui/channels/publish", { method: "POST", host: "localhost:8787", headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://localhost:8787", "sec-fetch-site": "same-origin" }, body: "channel=x&data=1" });
    expect(viewerPost.status).toBe(403);
    expect(await rows()).toBe(before);

    // The configured origin works, and valid traffic flows afterwards.
    expect((await req(open, "/mcp", { method: "POST", headers: { ...mcpHeaders, origin: `http://${HOST}` }, body: init })).status).toBe(200);
    const ok = await start({ ...json, origin: `http://${HOST}` }, JSON.stringify({ input: { fine: true }, instanceId: "fd-ok" }));
    expect(ok.status).toBe(201);
    expect((await open.waitFor("fd-ok")).output).toEqual({ fine: true });
  });
});

describe("failed credentials are throttled, never the right one (issue 42)", () => {
  it("25 wrong logins from one address, then the right one from it: a session (the wrong ones past 20 get 429); a start from it runs (bearer tokens: credential-throttle.unit.test.ts)", async () => {
    const app = makeTestApp(open.database, { workflows: [echo], apiToken: "throttle-token" });
    const login = (ip: string, token: string) =>
      app.edda.app.request("/ui/login", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://localhost", "cf-connecting-ip": ip }, body: `token=${token}` });
    const logins: number[] = [];
    for (let i = 0; i < 25; i++) logins.push((await login("203.0.113.9", `bad-${i}`)).status);
    expect(logins).toEqual([...Array<number>(20).fill(401), ...Array<number>(5).fill(429)]);
    const ok = await login("203.0.113.9", "throttle-token");
    expect(ok.status).toBe(303);
    expect(ok.headers.get("set-cookie")).toMatch(/HttpOnly/i);
    // Valid traffic flows: a start with the token from the throttled address runs to its end.
    const started = await app.edda.app.request("/workflows/fd_echo/instances", { method: "POST", headers: { authorization: "Bearer throttle-token", "cf-connecting-ip": "203.0.113.7", "content-type": "application/json" }, body: JSON.stringify({ input: 7, instanceId: "fd-throttled-ok" }) });
    expect(started.status).toBe(201);
    expect((await app.waitFor("fd-throttled-ok")).output).toBe(7);
    await app.edda.close();
  });

  it("behind a proxy: X-Forwarded-For names the client only when the proxy is trusted (EDDA_TRUSTED_PROXIES)", async () => {
    // A real Node server on loopback: every request's socket peer is 127.0.0.1, as behind a local reverse proxy.
    const serveWith = async (trustedProxies?: string[]) => {
      const t = makeTestApp(open.database, { workflows: [echo], apiToken: "proxy-token", viewer: false, ...(trustedProxies ? { trustedProxies } : {}) });
      const server = await new Promise<ServerType>((resolve) => {
        const s = serve({ fetch: t.edda.app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
      });
      const { port } = server.address() as AddressInfo;
      const call = (xff: string, token: string) => fetch(`http://127.0.0.1:${port}/instances`, { headers: { authorization: `Bearer ${token}`, "x-forwarded-for": xff } }).then((r) => r.status);
      return { call, close: async () => (await new Promise((r) => server.close(r)), await t.edda.close()) };
    };
    const trusting = await serveWith(["loopback"]);
    for (let i = 0; i < 21; i++) await trusting.call("203.0.113.7", `bad-${i}`);
    expect(await trusting.call("203.0.113.7", "bad")).toBe(429);
    expect(await trusting.call("198.51.100.2", "bad")).toBe(401); // another client behind the same proxy
    expect(await trusting.call("10.9.9.9, 203.0.113.7", "bad")).toBe(429); // a hop the client wrote itself changes nothing
    expect(await trusting.call("203.0.113.7", "proxy-token")).toBe(200);
    await trusting.close();

    // Not trusted: the header is anyone's to write, so it is ignored — every caller is the proxy's address.
    const plain = await serveWith();
    for (let i = 0; i < 21; i++) await plain.call(`203.0.113.${i}`, `bad-${i}`);
    expect(await plain.call("198.51.100.2", "bad")).toBe(429);
    expect(await plain.call("198.51.100.2", "proxy-token")).toBe(200);
    await plain.close();
  });
});
