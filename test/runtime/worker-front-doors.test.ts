// The front doors in real workerd (`wrangler dev`, functions/worker.ts on
// real Postgres, open mode with EDDA_PUBLIC_URL naming the server): a JSON
// write in a content type a page sends without a preflight is 415; a Host
// that is neither loopback nor configured is 421; a write from a foreign
// browser Origin is 403; internal routes refuse unsigned, forged, re-targeted
// (another route, an added query) and stale signed requests with 401 and a
// challenge — each refusal an RFC 9457 problem that writes nothing. A signed
// request is accepted under another Host name (the host is not in the MAC:
// docs/design.md "Security model"). Valid traffic flows after all of it.
import { request as httpRequest } from "node:http";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { sign } from "../../src/core/signature.ts";
import { queryRows } from "../../src/storage/database.ts";
import { startWorkerWith } from "./worker-setup.ts";

const SECRET = "front-door-secret";
const w = startWorkerWith("worker_front_doors", () => ({ EDDA_SECRET: SECRET }), { publicUrl: true, timeoutMs: 180_000 });

const rows = async () => Number((await queryRows<{ n: number }>(w.db.db, sql`SELECT (SELECT count(*) FROM workflow_instances)::int + (SELECT count(*) FROM workflow_history)::int AS n`))[0]!.n);

/** A request with any Host header (fetch does not let one be set). */
function raw(path: string, init: { method?: string; host?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const u = new URL(w.worker.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: u.hostname, port: u.port, path, method: init.method ?? "GET", headers: { host: init.host ?? u.host, ...init.headers, ...(init.body !== undefined ? { "content-length": String(Buffer.byteLength(init.body)) } : {}) } },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(init.body);
  });
}

function expectProblem(r: { status: number; headers: Record<string, string | string[] | undefined>; body: string }, status: number, errorType: string) {
  expect(r.status, r.body).toBe(status);
  expect(r.headers["content-type"]).toBe("application/problem+json");
  expect(JSON.parse(r.body)).toMatchObject({ type: "about:blank", status, detail: expect.any(String), error_type: errorType });
}

async function signed(path: string, body: string, opts: { query?: string; ts?: number } = {}) {
  return sign(SECRET, { method: "POST", path, ...(opts.query ? { query: opts.query } : {}), body }, opts.ts);
}

describe("front doors in wrangler dev", { timeout: 180_000 }, () => {
  it("415, 421 and a foreign Origin's 403 write nothing", async () => {
    const before = await rows();
    const start = '{"input":{"steps":1}}';
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      expectProblem(await raw("/workflows/pipeline/instances", { method: "POST", headers: { "content-type": type }, body: start }), 415, "UnsupportedMediaType");
    }
    for (const host of ["evil.example", `evil.example:${new URL(w.worker.url).port}`]) {
      expectProblem(await raw("/instances", { host }), 421, "MisdirectedRequest");
      expectProblem(await raw("/workflows/pipeline/instances", { method: "POST", host, headers: { "content-type": "application/json" }, body: start }), 421, "MisdirectedRequest");
    }
    expectProblem(await raw("/workflows/pipeline/instances", { method: "POST", headers: { "content-type": "application/json", origin: "http://evil.example" }, body: start }), 403, "Forbidden");
    expectProblem(await raw("/instances/x/cancel", { method: "POST", headers: { origin: `http://localhost:${new URL(w.worker.url).port}` } }), 403, "Forbidden");
    expect(await rows()).toBe(before);
  });

  it("internal routes refuse unsigned, forged, re-targeted and stale requests; a signed one under another Host name is accepted", async () => {
    const before = await rows();
    const body = "{}";
    const good = await signed("/_edda/sweep", body);
    const json = { "content-type": "application/json" };
    const refusals: [string, Record<string, string>][] = [
      ["/_edda/sweep", {}],
      ["/_edda/sweep", { ...good, "x-edda-signature": `sha256=${"0".repeat(64)}` }],
      ["/_edda/sweep?x=1", good], // a query added to a captured request
      ["/_edda/sweep", await signed("/_edda/sweep", body, { ts: Math.floor(Date.now() / 1000) - 600 })], // stale
    ];
    for (const [path, headers] of refusals) {
      const r = await raw(path, { method: "POST", headers: { ...json, ...headers }, body });
      expectProblem(r, 401, "Unauthorized");
      expect(r.headers["www-authenticate"]).toMatch(/^EddaSignature /);
    }
    // A captured step request replayed against the sweep.
    const stepBody = JSON.stringify({ instanceId: "nope" });
    expectProblem(await raw("/_edda/sweep", { method: "POST", headers: { ...json, ...(await signed("/_edda/step", stepBody)) }, body: stepBody }), 401, "Unauthorized");
    expect(await rows()).toBe(before);

    // Valid: signed, and also under a Host the open-mode guard would refuse on the API (the MAC binds method, path, query, time and body, not the host).
    expect((await raw("/_edda/sweep", { method: "POST", headers: { ...json, ...good }, body })).status).toBe(200);
    const other = await signed("/_edda/sweep", body);
    expect((await raw("/_edda/sweep", { method: "POST", host: "edda-internal.example", headers: { ...json, ...other }, body })).status).toBe(200);
  });

  it("valid traffic flows after the refusals", async () => {
    const r = await fetch(`${w.worker.url}/workflows/pipeline/instances`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { steps: 2 }, instanceId: "wfd-after" }) });
    expect(r.status).toBe(201);
    await expect
      .poll(async () => ((await (await fetch(`${w.worker.url}/instances/wfd-after`)).json()) as { status: string }).status, { timeout: 60_000, interval: 250 })
      .toBe("completed");
  });
});
