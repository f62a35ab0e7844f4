// The HTTP API through app.request() (no server), on PGlite: status codes,
// problem bodies, auth, signatures — and that rejected requests change
// nothing. The start refusals decided before storage (422, 404, 400, 413,
// 401) are in start-refusals.unit.test.ts, without a database.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigurationError } from "../../src/core/errors.ts";
import { sign } from "../../src/core/signature.ts";
import { serveNode } from "../../src/platform/node.ts";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "api-token-123";
let t: TestApp;

const json = (body: unknown, extra: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}`, ...extra },
  body: typeof body === "string" ? body : JSON.stringify(body),
});
const get = (path: string, auth = true) => t.edda.app.request(path, { headers: auth ? { authorization: `Bearer ${TOKEN}` } : {} });

beforeAll(async () => {
  const database = await openTestDatabase("pglite", "http");
  t = makeTestApp(database, { workflows: [orderSaga, pipeline], apiToken: TOKEN });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("POST /workflows/:name/instances", () => {
  it("starts an instance (201) and returns the existing one for a repeated instanceId (200)", async () => {
    const r1 = await t.edda.app.request("/workflows/order_saga/instances", json({ input: { orderId: "h1", amount: 5 }, instanceId: "http-1" }));
    expect(r1.status).toBe(201);
    expect(await r1.json()).toMatchObject({ instanceId: "http-1" });
    const r2 = await t.edda.app.request("/workflows/order_saga/instances", json({ input: { orderId: "h1", amount: 5 }, instanceId: "http-1" }));
    expect(r2.status).toBe(200);
    const done = await t.waitFor("http-1");
    expect(done.output).toEqual({ orderId: "h1", status: "shipped" });
  });
});

describe("instances", () => {
  it("GET /instances/:id with and without history; 404 when unknown", async () => {
    const start = await t.edda.app.request("/workflows/pipeline/instances", json({ input: { steps: 2 } }));
    const { instanceId } = (await start.json()) as { instanceId: string };
    await t.waitFor(instanceId);
    const plain = (await (await get(`/instances/${instanceId}`)).json()) as Record<string, unknown>;
    expect(plain).toMatchObject({ instanceId, status: "completed", output: { completed: 2 }, input: { steps: 2 } });
    expect(plain.history).toBeUndefined();
    const full = (await (await get(`/instances/${instanceId}?history=1`)).json()) as { history: unknown[] };
    expect(full.history).toHaveLength(2);
    expect((await get("/instances/does-not-exist")).status).toBe(404);
  });

  it("GET /instances filters and paginates with a cursor (bad filters: list-params.unit.test.ts)", async () => {
    for (let i = 0; i < 5; i++) await t.edda.start(pipeline, { steps: 0 });
    const seen = new Set<string>();
    let cursor: string | null = null;
    do {
      const r = await get(`/instances?workflow=pipeline&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(r.status).toBe(200);
      const page = (await r.json()) as { instances: { instanceId: string; workflowName: string }[]; nextCursor: string | null };
      expect(page.instances.length).toBeLessThanOrEqual(2);
      for (const i of page.instances) {
        expect(i.workflowName).toBe("pipeline");
        expect(seen.has(i.instanceId)).toBe(false);
        seen.add(i.instanceId);
      }
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen.size).toBeGreaterThanOrEqual(5);
  });

  it("POST /instances/:id/cancel → 404 unknown, 409 when finished", async () => {
    expect((await t.edda.app.request("/instances/nope/cancel", json({}))).status).toBe(404);
    await t.edda.start(pipeline, { steps: 0 }, { instanceId: "http-done" });
    await t.waitFor("http-done");
    const r = await t.edda.app.request("/instances/http-done/cancel", json({}));
    expect(r.status).toBe(409);
    expect(await r.json()).toMatchObject({ error_type: "ConflictError" });
  });
});

describe("internal routes", () => {
  it("a signed step is acknowledged (202) and a signed sweep runs (the refusals: signatures.unit.test.ts)", async () => {
    const body = JSON.stringify({ instanceId: "nope" });
    const step = { method: "POST", path: "/_edda/step", body };
    const ok = await t.edda.app.request("/_edda/step", { method: "POST", body, headers: await sign("test-secret", step) });
    expect(ok.status).toBe(202); // acknowledged at once; the step runs in the request's background work
    expect(await ok.json()).toEqual({ accepted: 1 });
    const sweepBody = "{}";
    const sw = await t.edda.app.request("/_edda/sweep", { method: "POST", body: sweepBody, headers: await sign("test-secret", { method: "POST", path: "/_edda/sweep", body: sweepBody }) });
    expect(sw.status).toBe(200);
    expect(await sw.json()).toHaveProperty("timersFired");
  });

  it("GET /healthz needs no token", async () => {
    const r = await t.edda.app.request("/healthz");
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ status: "ok", database: "ok" });
  });
});

describe("CloudEvents ingestion token", () => {
  it("ingestion accepts its own token (and the API token); other routes do not accept it", async () => {
    const app = makeTestApp(await openTestDatabase("pglite", "events_token"), { workflows: [pipeline], apiToken: TOKEN, eventsToken: "events-only" });
    const event = (id: string, token?: string) =>
      app.edda.app.request("/events", {
        method: "POST",
        headers: { "content-type": "application/cloudevents+json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ specversion: "1.0", type: "t.token", source: "/test", id, data: 1 }),
      });
    expect((await event("e1", "events-only")).status).toBe(202);
    expect((await event("e2", TOKEN)).status).toBe(202);
    expect((await event("e3")).status).toBe(401);
    expect((await event("e4", "wrong")).status).toBe(401);
    const start = await app.edda.app.request("/workflows/pipeline/instances", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer events-only" },
      body: JSON.stringify({ input: { steps: 0 } }),
    });
    expect(start.status).toBe(401);
    await app.edda.close();
    await app.database.close();
  });
});

describe("secure defaults (Node)", () => {
  it("the Node server listens on 127.0.0.1 and says it is unauthenticated; another interface without a token is refused", { timeout: 120_000 }, async () => {
    const logged: string[] = [];
    const warn = console.warn;
    console.warn = (...args: unknown[]) => void logged.push(args.join(" "));
    try {
      const node = await serveNode({ workflows: [pipeline], port: 0, dataDir: await mkdtemp(join(tmpdir(), "edda-node-")), sweepIntervalMs: 0, env: {} });
      expect((node.server.address() as AddressInfo).address).toBe("127.0.0.1");
      expect(logged.join("\n")).toMatch(/unauthenticated.*127\.0\.0\.1 only/);
      await node.close();
    } finally {
      console.warn = warn;
    }
    await expect(serveNode({ workflows: [pipeline], port: 0, hostname: "0.0.0.0", dataDir: await mkdtemp(join(tmpdir(), "edda-node-")), sweepIntervalMs: 0, env: {} })).rejects.toThrow(ConfigurationError);
  });
});
