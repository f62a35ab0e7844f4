// Hostile input, property-based (fast-check), through app.request() on PGlite:
// random and malformed bodies, headers and content types, CloudEvents-ish
// payloads, oversize bodies, invalid UTF-8, deeply nested JSON, bad
// signatures on the internal routes, odd paths and query strings on every
// route of SPEC §5. Whatever arrives: never a 5xx, never a stack trace or a
// source path in the body, and a rejected request changes no row in any table.
import fc from "fast-check";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sign } from "../../src/core/signature.ts";
import { createHmac } from "node:crypto";
import { activity, hmacVerifier, webhook, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "hostile-token";
const SECRET = "test-secret";
const HOOK_SECRET = "hook-secret";

// Cheap workflows only: an accepted request must settle in milliseconds.
const echoStep = activity("hostile_echo_step", async (_ctx, v: unknown) => v);
const echo = workflow("hostile_echo", async (ctx, input: unknown) => echoStep(ctx, input));
const typed = workflow("hostile_typed", { input: z.object({ n: z.number().int().min(0).max(3) }) }, async (_ctx, { n }) => n);
const onEvent = workflow("hostile.event", { eventHandler: true }, async (_ctx, input: unknown) => input);

let t: TestApp;
let countsQuery: ReturnType<typeof sql.raw>;

async function rowCounts(): Promise<Record<string, number>> {
  const [row] = await queryRows<Record<string, number>>(t.database.db, countsQuery);
  return row!;
}

async function settle(): Promise<void> {
  // Accepted requests leave follow-up steps and post-commit wake-ups behind.
  for (let i = 0; i < 3; i++) {
    await t.dispatcher.idle();
    await new Promise((r) => setTimeout(r, 5));
  }
}

beforeAll(async () => {
  const database = await openTestDatabase("pglite", "hostile");
  t = makeTestApp(database, {
    workflows: [orderSaga, echo, typed, onEvent],
    apiToken: TOKEN,
    secret: SECRET,
    // POST /webhooks/h_hook: signed by an HMAC over "<timestamp>.<body>", so stale and forged signatures are exercised too
    webhooks: [webhook("h_hook", { verify: hmacVerifier({ header: "x-h-signature", timestampHeader: "x-h-timestamp" }) })],
    webhookSecrets: { h_hook: HOOK_SECRET },
  });
  const tables = await queryRows<{ table_name: string }>(
    database.db,
    sql`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`,
  );
  expect(tables.length).toBeGreaterThan(10);
  countsQuery = sql.raw(`SELECT ${tables.map((r) => `(SELECT count(*)::int FROM "${r.table_name}") AS "${r.table_name}"`).join(", ")}`);
  await t.edda.start(echo, { seed: true }, { instanceId: "seed-1" });
  await t.waitFor("seed-1");
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

// --- the invariant ----------------------------------------------------------------

interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
}

/** A stack frame or a path into this checkout / node_modules, raw or JSON-escaped. */
const LEAK = new RegExp(String.raw`(\\n|\n)\s+at\s|node_modules|file://|` + process.cwd().replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));

async function check(req: Req): Promise<number> {
  let request: Request;
  try {
    request = new Request(`http://localhost${req.path}`, {
      method: req.method,
      headers: req.headers,
      ...(req.body !== undefined && req.method !== "GET" ? { body: req.body as BodyInit } : {}),
    });
  } catch {
    return -1; // not expressible as an HTTP request (the fetch API refuses it)
  }
  const before = await rowCounts();
  const res = await t.edda.app.request(request);
  const text = await res.text();
  const what = `${req.method} ${req.path.slice(0, 120)} → ${res.status} ${text.slice(0, 300)}`;
  expect(res.status, what).toBeLessThan(500);
  expect(text, what).not.toMatch(LEAK);
  if (res.status >= 400) expect(await rowCounts(), `rejected request changed rows: ${what}`).toEqual(before);
  else await settle();
  return res.status;
}

// --- arbitraries ----------------------------------------------------------------

const ascii = (max: number) => fc.stringMatching(new RegExp(`^[\\x20-\\x7e]{0,${max}}$`));
const oddSegments = ["%00", "%ZZ", "%", "..", "%2e%2e", "a%2Fb", "%C0%AF", "%FF", "%E0%A4%A", "%F0%9F%99%82", ";x=1", "*", "x".repeat(3000)];
const segment = fc.oneof(
  fc.constantFrom("hostile_echo", "hostile_typed", "order_saga", "seed-1", "nope", "hostile.event"),
  fc.constantFrom(...oddSegments),
  fc.string({ maxLength: 24, unit: "binary" }).map(encodeURIComponent),
);
const queryKey = fc.oneof(fc.constantFrom("status", "workflow", "limit", "cursor", "started_after", "started_before", "history"), ascii(8).map(encodeURIComponent));
const queryValue = fc.oneof(
  fc.constantFrom("running", "completed,failed", "0", "-1", "1e3", "1001", "NaN", "2020-01-01T00:00:00Z", "9999-99-99", "WyIyMDIwIiwiYSJd", "%ZZ", "%00", "1"),
  fc.string({ maxLength: 40, unit: "binary" }).map(encodeURIComponent),
);
const query = fc.array(fc.tuple(queryKey, queryValue), { maxLength: 4 }).map((kv) => (kv.length ? `?${kv.map(([k, v]) => `${k}=${v}`).join("&")}` : ""));

const ROUTES: { method: string; path: (s: string) => string }[] = [
  { method: "POST", path: () => "/" },
  { method: "POST", path: () => "/events" },
  { method: "POST", path: (s) => `/workflows/${s}/instances` },
  { method: "GET", path: (s) => `/instances/${s}` },
  { method: "GET", path: (s) => `/instances/${s}/why` },
  { method: "GET", path: () => "/instances" },
  { method: "POST", path: (s) => `/instances/${s}/cancel` },
  { method: "POST", path: (s) => `/instances/${s}/messages` },
  { method: "POST", path: (s) => `/channels/${s}/messages` },
  { method: "POST", path: () => "/_edda/step" },
  { method: "POST", path: () => "/_edda/sweep" },
  { method: "GET", path: () => "/healthz" },
  { method: "GET", path: () => "/readyz" },
  { method: "POST", path: () => "/webhooks/h_hook" },
  { method: "POST", path: (s) => `/webhooks/${s}` },
];
const route = fc.constantFrom(...ROUTES);

const contentType = fc.oneof(
  fc.constantFrom("application/json", "application/cloudevents+json", "application/cloudevents-batch+json", "text/plain", "application/octet-stream", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "application/json; charset=latin1", ""),
  ascii(40),
);
const cloudEvent = fc.record(
  {
    specversion: fc.oneof(fc.constant("1.0"), fc.constant("0.3"), fc.jsonValue()),
    type: fc.oneof(fc.constantFrom("hostile.event", "orders.paid", ""), fc.string({ unit: "binary" }), fc.jsonValue()),
    source: fc.oneof(fc.constant("/fuzz"), fc.string({ unit: "binary" }), fc.jsonValue()),
    id: fc.oneof(fc.uuid(), fc.string({ unit: "binary" }), fc.jsonValue()),
    time: fc.oneof(fc.constant("2024-01-01T00:00:00Z"), fc.string()),
    datacontenttype: fc.oneof(fc.constant("application/json"), fc.string()),
    data: fc.jsonValue({ maxDepth: 4 }),
    data_base64: fc.string(),
    eddainstanceid: fc.oneof(fc.constant("seed-1"), fc.string({ unit: "binary" })),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.record({ input: fc.jsonValue({ maxDepth: 3 }), instanceId: fc.oneof(segment, fc.jsonValue()) }, { requiredKeys: [] }).map((v) => JSON.stringify(v)),
  fc.record({ channel: fc.oneof(fc.string({ unit: "binary" }), fc.jsonValue()), data: fc.jsonValue({ maxDepth: 3 }), metadata: fc.jsonValue({ maxDepth: 2 }) }, { requiredKeys: [] }).map((v) => JSON.stringify(v)),
  fc.record({ instanceId: fc.oneof(segment, fc.jsonValue()), lease: fc.jsonValue({ maxDepth: 2 }), steps: fc.jsonValue({ maxDepth: 2 }) }, { requiredKeys: [] }).map((v) => JSON.stringify(v)),
  cloudEvent.map((v) => JSON.stringify(v)),
  fc.array(cloudEvent, { maxLength: 3 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 200, unit: "binary" }),
  fc.uint8Array({ maxLength: 200 }),
  fc.constantFrom("", "{", "[]", "null", '{"input":', "\uFEFF{}", '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}'),
);
const ceHeaders = fc.record(
  { "ce-specversion": fc.constantFrom("1.0", "0.3", "2"), "ce-type": ascii(20), "ce-source": ascii(20), "ce-id": ascii(20), "ce-time": ascii(30), "ce-eddainstanceid": ascii(20) },
  { requiredKeys: [] },
);
const auth = fc.oneof({ weight: 6, arbitrary: fc.constant(`Bearer ${TOKEN}`) }, { weight: 1, arbitrary: fc.constantFrom("Bearer wrong", "Basic abc", `bearer  ${TOKEN} `, "") }, { weight: 1, arbitrary: ascii(40) });
const signing = fc.constantFrom("none", "valid", "valid", "garbage", "wrong-secret", "stale");

/** A webhook delivery's signature as its sender would make it (or forge it). */
function webhookHeaders(kind: string, payload: string, now: number): Record<string, string> {
  const mac = (secret: string, ts: number) => ({ "x-h-timestamp": String(ts), "x-h-signature": createHmac("sha256", secret).update(`${ts}.${payload}`).digest("hex") });
  switch (kind) {
    case "valid":
      return mac(HOOK_SECRET, now);
    case "wrong-secret":
      return mac("not-the-secret", now);
    case "stale":
      return mac(HOOK_SECRET, now - 3600);
    case "garbage":
      return { "x-h-timestamp": String(now), "x-h-signature": "0".repeat(64) };
    default:
      return {};
  }
}

async function signatureHeaders(kind: string, path: string, payload: string): Promise<Record<string, string>> {
  const request = { method: "POST", path, body: payload };
  const now = Math.floor(Date.now() / 1000);
  if (path.startsWith("/webhooks/")) return webhookHeaders(kind, payload, now);
  switch (kind) {
    case "valid":
      return sign(SECRET, request);
    case "wrong-secret":
      return sign("not-the-secret", request);
    case "stale":
      return sign(SECRET, request, now - 3600);
    case "garbage":
      return { "x-edda-timestamp": String(now), "x-edda-signature": "sha256=" + "0".repeat(64) };
    default:
      return {};
  }
}

const decode = (b: string | Uint8Array) => (typeof b === "string" ? b : new TextDecoder().decode(b));

// --- properties -------------------------------------------------------------------

describe("hostile input never yields a 5xx, a stack trace, or a write when rejected", () => {
  it("random requests on every route: methods, paths, query strings, headers, content types, bodies, signatures", { timeout: 60_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({ route, segment, query, body, contentType, ceHeaders, auth, signing, extra: fc.dictionary(ascii(12).filter((k) => /^[a-z][a-z0-9-]*$/.test(k)), ascii(40), { maxKeys: 3 }), otherMethod: fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom("PUT", "DELETE", "PATCH", "GET", "POST") }) }),
        async (r) => {
          const payload = r.route.method === "GET" && !r.otherMethod ? undefined : r.body;
          const headers: Record<string, string> = { ...r.extra, ...r.ceHeaders, "content-type": r.contentType, authorization: r.auth };
          Object.assign(headers, await signatureHeaders(r.signing, r.route.path(r.segment), payload === undefined ? "" : decode(payload)));
          await check({ method: r.otherMethod ?? r.route.method, path: r.route.path(r.segment) + r.query, headers, ...(payload !== undefined ? { body: payload } : {}) });
        },
      ),
      { numRuns: 500 },
    );
  });

  it("internal routes: missing, forged, foreign, stale or mismatched signatures are 401 and write nothing", { timeout: 30_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("/_edda/step", "/_edda/sweep"),
        fc.oneof(fc.constant('{"instanceId":"seed-1"}'), fc.constant("{}"), fc.jsonValue().map((v) => JSON.stringify(v))),
        fc.oneof(
          fc.constantFrom("none", "garbage", "wrong-secret", "stale", "other-body", "other-route", "other-method", "future"),
          fc.constantFrom("1e9", "-1", " 1", "0x10", "99999999999999", "", "1.5").map((ts) => `timestamp:${ts}`),
        ),
        async (path, payload, kind) => {
          let headers: Record<string, string>;
          const request = { method: "POST", path, body: payload };
          if (kind === "other-body") headers = await sign(SECRET, { ...request, body: payload + " " });
          else if (kind === "other-route") headers = await sign(SECRET, { ...request, path: path === "/_edda/step" ? "/_edda/sweep" : "/_edda/step" });
          else if (kind === "other-method") headers = await sign(SECRET, { ...request, method: "GET" });
          else if (kind === "future") headers = await sign(SECRET, request, Math.floor(Date.now() / 1000) + 3600);
          else if (kind.startsWith("timestamp:")) headers = { ...(await sign(SECRET, request)), "x-edda-timestamp": kind.slice(10) };
          else headers = await signatureHeaders(kind, path, payload);
          expect(await check({ method: "POST", path, headers: { ...headers, "content-type": "application/json" }, body: payload })).toBe(401);
        },
      ),
      { numRuns: 150 },
    );
  });

  it("oversize, deeply nested (100k levels) and invalid UTF-8 bodies on every route", { timeout: 60_000 }, async () => {
    const deepArray = "[".repeat(100_000) + "]".repeat(100_000);
    const deepObject = '{"a":'.repeat(100_000) + "1" + "}".repeat(100_000);
    const bodies: [string, string | Uint8Array][] = [
      ["deep array", deepArray],
      ["deep object", deepObject],
      ["deep input", `{"input":${deepArray},"data":${deepArray},"channel":"c"}`],
      ["deep CloudEvent data", `{"specversion":"1.0","type":"hostile.event","source":"/s","id":"deep-1","data":${deepObject}}`],
      ["deep CloudEvent batch", `[{"specversion":"1.0","type":"t","source":"/s","id":"deep-2","data":${deepArray}}]`],
      ["oversize", JSON.stringify({ input: "x".repeat(1024 * 1024 + 1) })],
      ["invalid UTF-8", new Uint8Array([0x7b, 0x22, 0x69, 0x6e, 0x70, 0x75, 0x74, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0xff, 0xfe, 0xed, 0xa0, 0x80, 0x22, 0x7d])],
      ["NUL bytes", '{"input":"a\u0000b","channel":"a\u0000b","instanceId":"a\u0000b"}'],
    ];
    const cts = ["application/json", "application/cloudevents+json", "application/cloudevents-batch+json"];
    for (const r of ROUTES.filter((x) => x.method === "POST")) {
      for (const [, payload] of bodies) {
        for (const ct of cts) {
          const headers = { "content-type": ct, authorization: `Bearer ${TOKEN}`, "ce-specversion": "1.0", "ce-type": "hostile.event", "ce-source": "/s", "ce-id": `h-${Math.random()}` };
          Object.assign(headers, await signatureHeaders("valid", r.path("hostile_echo"), decode(payload)));
          await check({ method: "POST", path: r.path("hostile_echo"), headers, body: payload });
        }
      }
    }
  });

  it("regressions found by this suite: each was a 500 before its fix", async () => {
    const json = { "content-type": "application/json", authorization: `Bearer ${TOKEN}` };
    // A NUL byte in an id reached SQL (SQLSTATE 22021).
    expect(await check({ method: "POST", path: "/instances/%00/cancel", headers: json, body: "{}" })).toBe(400);
    // A list cursor whose timestamp JS accepts and Postgres does not ("2020", SQLSTATE 22007).
    expect(await check({ method: "GET", path: `/instances?cursor=${btoa(JSON.stringify(["2020", "a"]))}`, headers: json })).toBe(400);
    // A binary-mode 0.3 CloudEvent without ce-source passed the SDK's validation and broke the dedupe insert.
    const ce = { ...json, "ce-specversion": "0.3", "ce-type": "t", "ce-id": "1" };
    expect(await check({ method: "POST", path: "/events", headers: ce, body: "{}" })).toBe(400);
    // 100k nested arrays overflowed the stack in the payload serializer.
    const deep = `{"input":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
    expect(await check({ method: "POST", path: "/workflows/hostile_echo/instances", headers: json, body: deep })).toBe(400);
  });
});
