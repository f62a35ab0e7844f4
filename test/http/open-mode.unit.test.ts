// Open mode (no API token, the `npm start` default) serves only loopback and
// configured Host values, so a page on a rebound DNS name cannot read or
// drive the API (421, and nothing of the app in the answer); the probes and
// the signed internal routes are served whatever the Host (they are not the
// API), and with a token the token is what guards. Decided before storage: no
// database is asked for by a refusal. Moved from front-doors.test.ts, which
// keeps the content-type and Origin doors on real Postgres.
import { afterAll, describe, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { mcp } from "../../src/mcp.ts";
import { appWithoutDatabase, type AppWithoutDatabase } from "../support/no-database.ts";

const step = activity("fd_step", async (_ctx, v: unknown) => v);
const echo = workflow("fd_echo", async (ctx, input: unknown) => step(ctx, input));
const HOST = "127.0.0.1:8787";

const open = appWithoutDatabase({ workflows: [echo], mcp: mcp(), allowedHosts: [HOST, "edda.internal"] });
const guarded = appWithoutDatabase({ workflows: [echo], mcp: mcp(), apiToken: "fd-token", allowedHosts: [HOST] });
afterAll(async () => {
  await open.edda.close();
  await guarded.edda.close();
});

const req = (app: AppWithoutDatabase, path: string, init: RequestInit & { host?: string } = {}) => {
  const { host = HOST, ...rest } = init;
  return Promise.resolve(app.edda.app.request(new Request(`http://${host}${path}`, rest)));
};

describe("open mode and the Host header", () => {
  it("serves only loopback and configured Host values (DNS rebinding), probes and internal calls excepted", async () => {
    for (const [method, path] of [["GET", "/instances"], ["GET", "/ui"], ["GET", "/openapi.json"], ["POST", "/workflows/fd_echo/instances"], ["POST", "/mcp"]] as const) {
      const res = await req(open, path, { method, host: "evil.example:8787", headers: { "content-type": "application/json" }, ...(method === "POST" ? { body: JSON.stringify({ input: 1 }) } : {}) });
      expect(res.status, `${method} ${path}`).toBe(421);
      expect((await res.text()).replaceAll(path, ""), "nothing but the request's own path (the problem's instance)").not.toContain("fd_echo");
    }
    expect(open.touched).toEqual([]);
    // The probe is answered (here: the database is unreachable, so 503), never 421.
    expect((await req(open, "/healthz", { host: "10.0.0.7:8787" })).status).toBe(503);
    open.touched.length = 0;
    expect((await req(open, "/_edda/sweep", { method: "POST", host: "edda.internal" })).status).toBe(401); // reaches the signature check
    for (const host of ["localhost:3000", "127.0.0.1", "[::1]:8787", "EDDA.internal:443", HOST]) expect((await req(open, "/openapi.json", { host })).status, host).toBe(200);
    // With a token, the token is what guards: any Host is served to its holder.
    expect((await req(guarded, "/openapi.json", { host: "evil.example", headers: { authorization: "Bearer fd-token" } })).status).toBe(200);
    expect((await req(guarded, "/openapi.json", { host: "evil.example" })).status).toBe(401);
    expect([...open.touched, ...guarded.touched]).toEqual([]);
  });
});
