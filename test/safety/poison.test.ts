// The "poison" property suite (issue: safe in the open). fast-check sends
// hostile values — tag look-alikes ($bytes, $date, …), __proto__ and
// constructor keys, huge, deep and odd-unicode strings, wrong types, big
// numbers — in every payload slot of every route (start input and instance
// id, messages and their metadata, channel publishes, CloudEvents data and
// extensions, path and query parameters, viewer forms, MCP calls, outbox
// dead-letter actions, internal signed routes) and through publish / sendTo /
// sendEvent in code, WHILE valid traffic flows. The hostile requests come
// from one table keyed by route, and a test compares it with the routes the
// app serves (Hono's own route list, the one the OpenAPI document is built
// from): a new route without hostile calls fails it. After each run:
//   - the valid traffic completed with exactly its expected outputs;
//   - every sweep completed every task, and no row failure names a valid instance;
//   - nothing answered 5xx, and no body carried a stack or a source path;
//   - hostile values that were accepted round-trip unchanged (echo outputs,
//     received messages), and no instance is left runnable: everything is at
//     rest (finished, waiting, or set aside as quarantined, visibly).
// On real Postgres. POISON_RUNS=200 npx vitest run test/safety/poison.test.ts for a long run.
import { createHmac } from "node:crypto";
import fc from "fast-check";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, createWebhook, emit, hmacVerifier, publish, sendEvent, sendTo, subscribe, receive, waitEvent, waitMessage, webhook, workflow } from "../../src/index.ts";
import { sign } from "../../src/core/signature.ts";
import { webhookToken } from "../../src/core/webhook-waits.ts";
import type { SweepReport } from "../../src/engine/sweeper.ts";
import { endpointsOf } from "../../src/http/openapi.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { mcp } from "../../src/mcp.ts";

const RUNS = Number(process.env.POISON_RUNS ?? 6);
const TOKEN = "poison-token";
let t: TestApp;

// --- workflows: cheap, and each shows what it received ---------------------------------
const echoStep = activity("p_echo_step", async (_ctx, v: unknown) => v);
const echo = workflow("p_echo", async (ctx, input: unknown) => echoStep(ctx, input));
const waiter = workflow("p_waiter", async (ctx) => (await waitMessage(ctx, "p-reply", { timeoutSeconds: 120 })).data);
const listener = workflow("p_listener", async (ctx, type: string) => (await waitEvent(ctx, type, { timeoutSeconds: 120 })).data);
const feed = workflow("p_feed", async (ctx) => {
  await subscribe(ctx, "p-feed", "broadcast");
  return (await receive(ctx, "p-feed", { timeoutSeconds: 120 })).data;
});
const sender = workflow("p_sender", async (ctx, input: { target: string; data: unknown; channel: string }) => {
  await sendTo(ctx, input.target, "p-reply", input.data);
  await publish(ctx, input.channel, input.data, { metadata: { from: "p_sender" } });
  return "sent";
});
const onOrder = workflow("p.order", { eventHandler: true }, async (ctx, input: unknown) => echoStep(ctx, input));
// Hostile stream items: the value as an activity chunk and as an emit, and bytes; refusals must be typed.
const streamStep = activity(
  "p_stream_step",
  async (ctx, v: unknown) => {
    try {
      ctx.stream.write(v, { topic: "v" });
      ctx.stream.write(new Uint8Array([0, 0xff, 0xfe, 0x80]), { topic: "bytes" });
      await ctx.stream.close();
      return "streamed";
    } catch (err) {
      return (err as Error).name;
    }
  },
  { transactional: false },
);
const streamer = workflow("p_streamer", async (ctx, v: unknown) => {
  const wrote = await streamStep(ctx, v);
  let emitted = "emitted";
  try {
    await emit(ctx, v, { topic: "v" });
  } catch (err) {
    emitted = (err as Error).name;
  }
  return { wrote, emitted };
});
const hooked = workflow("p_hooked", async (ctx) => (await (await createWebhook(ctx, { expiresIn: 120 })).wait()).body);

// --- hostile values ---------------------------------------------------------------------
const TAGS = ["$bytes", "$date", "$$bytes", "$$date", "$", "$$", "$undefined", "$bigint", "$map", "$set", "$ref"];
const tagLike = fc
  .tuple(fc.constantFrom(...TAGS), fc.oneof(fc.string(), fc.constantFrom("AAAA", "!!!", "2020-01-01T00:00:00.000Z", "not a date", ""), fc.integer(), fc.constant(null)))
  .map(([k, v]) => Object.fromEntries([[k, v]]) as unknown);
const protoLike = fc
  .constantFrom(
    '{"__proto__":{"polluted":true}}',
    '{"constructor":{"prototype":{"polluted":true}}}',
    '{"__proto__":null,"a":1}',
    '{"toString":"x","valueOf":1,"hasOwnProperty":false,"toJSON":"no"}',
    '{"prototype":{"x":1},"__defineGetter__":2}',
  )
  .map((s) => JSON.parse(s) as unknown);
const oddString = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.constantFrom("\u0000", "a\u0000b", "\ud800", "\udfff", "x\ud83d", "\uffff", "\ufffe", "\u202e\u2066", "e\u0301", "\\u0000", "%00", "../../etc", "<script>alert(1)</script>", "😀".repeat(300)),
  fc.integer({ min: 1000, max: 60_000 }).map((n) => "y".repeat(n)),
);
const bigNumber = fc.constantFrom(1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, -0, 5e-324, 123456789012345680000, -2147483649);
const deep = fc.integer({ min: 20, max: 400 }).map((d) => {
  let v: unknown = "bottom";
  for (let i = 0; i < d; i++) v = i % 2 ? [v] : { d: v };
  return v;
});
const key = fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom(...TAGS, "__proto__", "constructor", "prototype"));
const { value: hostileValue } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    tagLike,
    protoLike,
    oddString,
    bigNumber,
    fc.boolean(),
    fc.constant(null),
    deep,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.array(fc.tuple(key, tie("value")), { maxLength: 4 }).map((entries) => Object.fromEntries(entries) as unknown),
  ),
}));
const hostileName = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.constantFrom("__proto__", "constructor", "$bytes", "..", "a/b", "a#b", "a:b", "a%2Fb", "é", "😀", "\ud800", "x\u0000y", "\u0000", "x".repeat(300), " ", "p-reply", "p-feed"),
);

// --- the invariants of every response -----------------------------------------------------
const LEAK = new RegExp(String.raw`(\\n|\n)\s+at\s|node_modules|file://|` + process.cwd().replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
const responses: { what: string; status: number }[] = [];

async function call(what: string, path: string, init: { method?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}`, ...init.headers };
  let body: string | undefined = init.raw;
  if (init.body !== undefined) {
    body = JSON.stringify(init.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await t.edda.app.request(path, { method: init.method ?? (body === undefined ? "GET" : "POST"), headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  responses.push({ what, status: res.status });
  expect(res.status, `${what} → ${res.status}: ${text.slice(0, 300)}`).toBeLessThan(500);
  expect(LEAK.test(text), `${what} leaked: ${text.slice(0, 300)}`).toBe(false);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  // Every API refusal is an RFC 9457 problem (the viewer answers HTML pages, MCP JSON-RPC errors).
  if (res.status >= 400 && !/^\/(ui|mcp)(\/|$|\?)/.test(path)) {
    expect(res.headers.get("content-type"), `${what}: problem media type`).toBe("application/problem+json");
    expect(parsed, `${what}: problem members`).toMatchObject({ type: "about:blank", status: res.status, title: expect.any(String), detail: expect.any(String), instance: new URL(path, "http://x").pathname, error_type: expect.any(String) });
    if (res.status === 401) expect(res.headers.get("www-authenticate"), `${what}: a 401 names its challenge`).toBeTruthy();
  }
  return { status: res.status, body: parsed };
}

/** A path segment: encoded when it can be; a lone surrogate becomes an invalid UTF-8 escape (hostile too). */
const seg = (s: string) => {
  try {
    return encodeURIComponent(s);
  } catch {
    return "%ED%A0%80";
  }
};
/** What a value looks like after a JSON round-trip (-0 → 0), for comparisons. */
const viaJson = (v: unknown) => JSON.parse(JSON.stringify(v ?? null)) as unknown;

/** Code-side calls may refuse hostile input, but only with a typed error, never a raw database error. */
async function inCode(what: string, fn: () => Promise<unknown>): Promise<boolean> {
  try {
    await fn();
    return true;
  } catch (err) {
    const name = err instanceof Error ? err.name : String(err);
    expect(["ValidationError", "InvalidArgumentError", "InvalidCloudEventError", "TypeError", "RangeError", "EddaApiError"], `${what} threw ${name}: ${String(err)}`).toContain(name);
    return false;
  }
}

beforeAll(async () => {
  const database = await openTestDatabase("postgres-js", "poison");
  t = makeTestApp(database, {
    workflows: [echo, waiter, listener, feed, sender, onOrder, streamer, hooked],
    apiToken: TOKEN,
    // MCP on, so /mcp is one of the routes under attack too
    mcp: mcp(),
    // a declared webhook, so POST /webhooks/:name is under attack too (signed and unsigned)
    webhooks: [webhook("p_hook", { verify: hmacVerifier({ header: "x-p-signature" }) })],
    webhookSecrets: { p_hook: "p-hook-secret" },
    quarantineAfterFailures: 3,
    // The outbox relays to this very app's ingestion: hostile events make the full round.
    brokerUrl: "http://edda.test/events",
    outbox: { fetch: (input, init) => Promise.resolve(t.edda.app.request(String(input), { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${TOKEN}` } })) },
  });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

async function settle(reports: SweepReport[]): Promise<void> {
  for (let i = 0; i < 4; i++) {
    await t.dispatcher.idle();
    const r = await t.edda.sweep({ resumeIdleSeconds: 0 });
    reports.push(r);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await t.dispatcher.idle();
}

let run = 0;

/** The URL an instance's createWebhook made, once its step recorded it: the same derivation from history the replay runs (with the app's secret). */
async function hookPath(instanceId: string): Promise<string> {
  for (let i = 0; i < 400; i++) {
    const [row] = await queryRows<{ data: string; activity_id: string }>(
      t.database.db,
      sql`SELECT event_data AS data, activity_id FROM workflow_history WHERE instance_id = ${instanceId} AND event_data LIKE '%"edda.create_webhook"%'`,
    );
    if (row) return `/hooks/${await webhookToken("test-secret", instanceId, row.activity_id, (JSON.parse(row.data) as { result: { nonce: string } }).result.nonce)}`;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`${instanceId} made no webhook`);
}

// --- the hostile requests, one entry per route the app serves ----------------------------
interface Hostile {
  r: number;
  v0: unknown;
  v1: unknown;
  v2: unknown;
  v3: unknown;
  n0: string;
  n1: string;
  n2: string;
  n3: string;
  metadata: unknown;
  customId: boolean;
  /** Per-wait URLs (createWebhook) of this run's valid and hostile p_hooked instances. */
  hooks: { valid: string; hostile: string };
}
type Init = { method?: string; body?: unknown; raw?: string; headers?: Record<string, string> };
interface HostileRequest {
  what: string;
  path: string;
  init: () => Init | Promise<Init>;
}
const req = (what: string, path: string, init: Init = {}): HostileRequest => ({ what, path, init: () => init });
const CE = { "content-type": "application/cloudevents+json" };
const MCP = { "content-type": "application/json", accept: "application/json, text/event-stream" };
/** A viewer form post: same-origin (its CSRF guard), URL-encoded, every value a string. */
const form = (what: string, path: string, fields: Record<string, string>): HostileRequest =>
  req(what, path, { raw: new URLSearchParams(fields).toString(), headers: { "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin" } });
/** An internal route's request, signed like a real follow-up or cron call (the body is hostile, not the signature). */
const signed = (what: string, path: string, raw: string): HostileRequest => ({
  what,
  path,
  init: async () => ({ raw, headers: { "content-type": "application/json", ...(await sign("test-secret", { method: "POST", path, body: raw })) } }),
});
const text = (v: unknown) => (typeof v === "string" ? v : (JSON.stringify(v) ?? "null"));

/** Keyed by `METHOD /path` as the app lists its routes (OpenAPI path form). */
const ROUTES: Record<string, (h: Hostile) => HostileRequest[]> = {
  "POST /workflows/{name}/instances": ({ v0, v1, n0, n1, customId }) => [
    req("start input", "/workflows/p_echo/instances", { body: { input: v0, ...(customId ? { instanceId: n0 } : {}) } }),
    req("start wrong shape", "/workflows/p_echo/instances", { body: v1 }),
    req("start unknown workflow", `/workflows/${seg(n1)}/instances`, { body: { input: v1 } }),
    req("start as text/plain (415)", "/workflows/p_echo/instances", { raw: JSON.stringify({ input: v0 }), headers: { "content-type": "text/plain" } }),
    req("start as a form (415)", "/workflows/p_echo/instances", { raw: `input=${seg(n0)}`, headers: { "content-type": "application/x-www-form-urlencoded" } }),
  ],
  "POST /instances/{id}/messages": ({ r, v1, v2, v3, n2, n3, metadata }) => [
    req("valid message", `/instances/pw-${r}/messages`, { body: { channel: "p-reply", data: { ok: r } } }),
    req("message data", `/instances/ph-${r}/messages`, { body: { channel: "p-reply", data: v1, metadata } }),
    req("message channel", `/instances/${seg(n2)}/messages`, { body: { channel: n3, data: v2, metadata: v3 } }),
    req("message wrong shape", `/instances/ph-${r}/messages`, { body: v2 }),
  ],
  "POST /channels/{channel}/messages": ({ v2, v3, n0, n3, metadata }) => [
    req("publish data", `/channels/p-feed/messages`, { body: { data: v2, metadata } }),
    req("publish channel", `/channels/${seg(n3)}/messages`, { body: { data: v3 } }),
    req("publish wrong shape", `/channels/${seg(n0)}/messages`, { body: v3 }),
  ],
  "POST /events": ({ r, v0, v1, v2, v3, n0, n1, n2, n3, metadata }) => [
    req("valid event", "/events", { body: { specversion: "1.0", type: `valid.${r}`, source: "/valid", id: `v-${r}`, data: { ok: r } }, headers: CE }),
    req("event data", "/events", { body: { specversion: "1.0", type: "p.order", source: "/poison", id: `h-${r}`, data: v0 }, headers: CE }),
    req("event attrs", "/events", { body: { specversion: "1.0", type: n1, source: n2, id: n3, data: v1, ...(typeof metadata === "object" && metadata ? { ext: metadata } : { ext: n0 }) }, headers: CE }),
    req("event wrong shape", "/events", { body: v2, headers: CE }),
    req("event batch", "/events", { body: [v3, { specversion: "1.0", type: "p.order", source: "/poison", id: `hb-${r}`, data: v3 }], headers: { "content-type": "application/cloudevents-batch+json" } }),
  ],
  "POST /": ({ r, v0 }) => [
    req("binary event", "/", { raw: JSON.stringify(v0), headers: { "content-type": "application/json", "ce-specversion": "1.0", "ce-type": "p.order", "ce-source": "/poison-bin", "ce-id": `hbin-${r}` } }),
  ],
  "POST /webhooks/{name}": ({ r, v0, v1, n0, n1 }) => {
    const hook = (what: string, raw: string, secret = "p-hook-secret", name = "p_hook") =>
      req(what, `/webhooks/${name}`, { raw, headers: { "content-type": "application/json", "x-p-signature": createHmac("sha256", secret).update(raw).digest("hex") } });
    return [
      hook("valid webhook", JSON.stringify({ type: `hook.${r}`, data: { ok: r } })),
      hook("webhook data", text(v0)),
      hook("webhook wrong secret", text(v1), "not-the-secret"),
      hook("webhook unknown name", text(v1), "p-hook-secret", seg(n0)),
      req("webhook unsigned", "/webhooks/p_hook", { raw: text(v1), headers: { "x-p-signature": text(n1).replace(/[^\x21-\x7e]/g, "") || "x" } }),
    ];
  },
  "POST /hooks/{token}": ({ v0, n0, hooks }) => [
    req("valid hook call", hooks.valid, { body: { ok: "hook" } }),
    req("hook replay", hooks.valid, { body: { replayed: true } }),
    req("hook data", hooks.hostile, { raw: text(v0), headers: { "content-type": "application/json", "x-hostile": text(n0).replace(/[^\x21-\x7e]/g, "") || "x" } }),
    // prefixed, so a hostile name such as ".." stays a token and never becomes a dot segment of the path
    req("hook unknown token", `/hooks/t-${seg(n0)}`, { body: v0 }),
    req("hook huge body", hooks.hostile, { raw: JSON.stringify({ pad: "z".repeat(1024 * 1024 + 1) }), headers: { "content-type": "application/json" } }),
    req("hook wrong method", hooks.hostile, { method: "PUT", body: v0 }),
  ],
  "GET /instances/{id}": ({ n0, n1 }) => [req("get instance", `/instances/${seg(n0)}?history=${seg(n1)}`)],
  "GET /instances": ({ n0, n1, n2, n3 }) => [
    req("list", `/instances?status=${seg(n1)}&workflow=${seg(n2)}&cursor=${seg(n3)}&limit=${seg(n0)}`),
    req("list payloads", `/instances?include=${seg(n0)}&started_after=${seg(n1)}&started_before=${seg(n2)}`),
    req("list tags", `/instances?tag=${seg(n3)}&tag=${seg(n0)}:${seg(n1)}&tag=k:${seg(n2)}`),
  ],
  "GET /instances/{id}/history": ({ r, n0, n1, n2, n3 }) => [
    req("history", `/instances/${seg(n1)}/history?after=${seg(n2)}&limit=${seg(n3)}&format=${seg(n0)}`),
    req("history ndjson", `/instances/ph-${r}/history?format=ndjson`),
    req("history ndjson id", `/instances/${seg(n2)}/history?format=ndjson`),
  ],
  // An instance the run started (ph-…, hostile values in its input) and a hostile id: a reason or a 404, never more.
  "GET /instances/{id}/why": ({ r, n1 }) => [req("why", `/instances/ph-${r}/why`), req("why id", `/instances/${seg(n1)}/why`)],
  "GET /instances/{id}/result": ({ n2, n3 }) => [req("result", `/instances/${seg(n2)}/result?wait=${seg(n3)}`)],
  "GET /instances/{id}/stream": ({ n0, n1, n2 }) => [
    req("stream", `/instances/${seg(n1)}/stream?topic=${seg(n2)}&after=${seg(n0)}`),
    req("stream last-event-id", `/instances/${seg(n2)}/stream`, { headers: { "last-event-id": text(n0).replace(/[^\x21-\x7e]/g, "") || "x" } }),
  ],
  "POST /instances/{id}/cancel": ({ n3 }) => [req("cancel", `/instances/${seg(n3)}/cancel`, { method: "POST" })],
  "POST /instances/{id}/resume": ({ n0, v0 }) => [req("resume", `/instances/${seg(n0)}/resume`, { body: v0 })],
  "POST /instances/{id}/rerun": ({ r, v0, n0, n1 }) => [
    req("rerun", `/instances/${seg(n0)}/rerun`, { body: { requestId: n1, input: v0 } }),
    req("rerun valid id", `/instances/pw-${r}/rerun`, { body: { requestId: `p-${r}` } }),
    req("rerun wrong shape", `/instances/ph-${r}/rerun`, { body: v0 }),
  ],
  "POST /instances/{id}/fork": ({ r, v1, n1, n2 }) => [
    req("fork", `/instances/${seg(n1)}/fork`, { body: { fromActivityId: n2, requestId: n1 } }),
    req("fork valid id", `/instances/pw-${r}/fork`, { body: { fromActivityId: n2 } }),
    req("fork wrong shape", `/instances/ph-${r}/fork`, { body: v1 }),
  ],
  "POST /instances/bulk": ({ r, v2, v3, n3 }) => [
    req("bulk dry run", "/instances/bulk", { body: { filter: v2, action: "cancel", dryRun: true } }),
    req("bulk of nothing", "/instances/bulk", { body: { filter: { workflow: `p_none_${r}`, search: n3 }, action: "cancel", requestId: `p-${r}` } }),
    req("bulk wrong shape", "/instances/bulk", { body: v3 }),
    // issue 42: the same requestId with another filter is a 409 naming the operation, never its work.
    req("bulk request id reused with another filter", "/instances/bulk", { body: { filter: { workflow: `p_none_${r}`, status: ["running"] }, action: "cancel", requestId: `p-${r}` } }),
  ],
  "GET /operations": ({ n0 }) => [req("operations", `/operations?limit=${seg(n0)}`)],
  "GET /operations/{id}": ({ r, n1 }) => [req("operation", `/operations/${seg(n1)}`), req("valid operation", `/operations/bulk-p-${r}`)],
  "POST /schedules/{workflow}/pause": ({ n0, v0 }) => [req("pause", `/schedules/${seg(n0)}/pause`, { body: v0 })],
  "POST /schedules/{workflow}/resume": ({ n1, v1 }) => [req("resume schedule", `/schedules/${seg(n1)}/resume`, { body: v1 })],
  "POST /schedules/{workflow}/trigger": ({ n2, n3 }) => [req("trigger", `/schedules/${seg(n2)}/trigger`, { body: { requestId: n3 } })],
  "POST /instances/{id}/upgrade": ({ r, n1, v1 }) => [req("upgrade", `/instances/${seg(n1)}/upgrade`, { body: v1 }), req("upgrade valid id", `/instances/pw-${r}/upgrade`)],
  "GET /deployments": ({ n0, n1 }) => [req("valid deployments", "/deployments"), req("deployments", `/deployments?${seg(n0)}=${seg(n1)}`)],
  "GET /schedules": ({ n0, n1 }) => [req("valid schedules", "/schedules"), req("schedules", `/schedules?${seg(n0)}=${seg(n1)}`)],
  "GET /outbox/dead-letters": ({ n0, n1, n2, n3 }) => [
    req("valid dead letters", "/outbox/dead-letters?limit=100&include=payloads"),
    req("dead letters", `/outbox/dead-letters?status=${seg(n0)}&type=${seg(n1)}&cursor=${seg(n2)}&limit=${seg(n3)}`),
    req("dead letters payloads", `/outbox/dead-letters?include=${seg(n1)}`),
  ],
  "POST /outbox/dead-letters/{eventId}/redeliver": ({ n1, v1 }) => [req("redeliver", `/outbox/dead-letters/${seg(n1)}/redeliver`, { body: v1 })],
  "POST /outbox/dead-letters/{eventId}/discard": ({ n2, v2 }) => [req("discard", `/outbox/dead-letters/${seg(n2)}/discard`, { body: v2 })],
  "GET /healthz": ({ n0 }) => [req("healthz", `/healthz?${seg(n0)}=1`)],
  "GET /readyz": ({ n1 }) => [req("readyz", `/readyz?${seg(n1)}=1`)],
  "GET /metrics": ({ n2 }) => [req("metrics", `/metrics?${seg(n2)}=1`)],
  "GET /openapi.json": ({ n1 }) => [req("openapi", `/openapi.json?${seg(n1)}=${seg(n1)}`)],
  "GET /docs": ({ n2 }) => [req("docs", `/docs?x=${seg(n2)}`)],
  "POST /_edda/step": ({ r, v0, n0 }) => [
    signed("step", "/_edda/step", JSON.stringify({ instanceId: n0 })),
    // issue 42: a follow-up naming a lease that has moved on (a replayed capture) runs nothing — one, or 500 in a batch.
    signed("step stale lease", "/_edda/step", JSON.stringify({ instanceId: `pw-${r}`, lease: { workerId: "edda-edge:replayed", token: 1 }, hop: 1 })),
    signed("step stale batch", "/_edda/step", JSON.stringify({ steps: Array.from({ length: 500 }, (_, i) => ({ instanceId: `pw-${r}`, lease: { workerId: `edda-edge:replayed-${i}`, token: i } })), hop: 1 })),
    signed("step wrong shape", "/_edda/step", JSON.stringify(v0)),
    req("step unsigned", "/_edda/step", { body: { instanceId: n0 } }),
  ],
  "POST /_edda/sweep": ({ v1 }) => [signed("sweep", "/_edda/sweep", JSON.stringify(v1)), req("sweep unsigned", "/_edda/sweep", { body: v1 })],
  "POST /mcp": ({ v0, v1, n0 }) => [
    req("mcp tool call", "/mcp", { body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "start_workflow", arguments: { workflow: "p_echo", input: v0 } } }, headers: MCP }),
    req("mcp unknown tool", "/mcp", { body: { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: n0, arguments: v1 } }, headers: MCP }),
    req("mcp wrong shape", "/mcp", { body: v1, headers: MCP }),
    // A task result with a hostile progress token (answered as SSE); the prefixed id names no instance, so it never waits.
    req("mcp task result with progress", "/mcp", { body: { jsonrpc: "2.0", id: 3, method: "tasks/result", params: { taskId: `pt-${text(n0)}`, _meta: { progressToken: v0 } } }, headers: MCP }),
  ],
  "GET /mcp": ({ n1 }) => [req("mcp get", `/mcp?${seg(n1)}=1`, { headers: MCP })],
  "DELETE /mcp": ({ n2 }) => [req("mcp delete", "/mcp", { method: "DELETE", headers: { ...MCP, "mcp-session-id": text(n2).replace(/[^\x21-\x7e]/g, "") || "x" } })],
  // the viewer (bearer token instead of a login session; forms from its own origin)
  "GET /ui/login": ({ n0 }) => [req("ui login page", `/ui/login?next=${seg(n0)}`)],
  "POST /ui/login": ({ n1 }) => [form("ui login", "/ui/login", { token: n1 })],
  "POST /ui/logout": ({ n2 }) => [form("ui logout", "/ui/logout", { x: n2 })],
  "GET /ui": ({ n0, n1, n2, n3 }) => [req("ui list", `/ui?status=${seg(n0)}&workflow=${seg(n1)}&q=${seg(n2)}&cursor=${seg(n3)}&from=${seg(n0)}&range=${seg(n1)}&refresh=${seg(n2)}&tag=${seg(n3)}`)],
  "GET /ui/instances/{id}": ({ n0, n1, n2 }) => [req("ui instance", `/ui/instances/${seg(n0)}?run=${seg(n1)}&after=${seg(n2)}`)],
  "GET /ui/instances/{id}/stream": ({ n1, n3 }) => [req("ui stream", `/ui/instances/${seg(n1)}/stream`, { headers: { "last-event-id": text(n3).replace(/[^\x21-\x7e]/g, "") || "x" } })],
  "GET /ui/instances/{id}/raw/{part}": ({ r, n0 }) => [req("ui raw input", `/ui/instances/ph-${r}/raw/input`), req("ui raw", `/ui/instances/${seg(n0)}/raw/output`)],
  "GET /ui/instances/{id}/raw/history/{eventId}": ({ r, n1, n2 }) => [req("ui raw history", `/ui/instances/ph-${r}/raw/history/1?run=${seg(n2)}`), req("ui raw history id", `/ui/instances/${seg(n1)}/raw/history/${text(n2).replace(/\D/g, "").slice(0, 15) || "0"}`)],
  "POST /ui/instances/{id}/cancel": ({ n3 }) => [form("ui cancel", `/ui/instances/${seg(n3)}/cancel`, {})],
  "POST /ui/instances/{id}/resume": ({ n0 }) => [form("ui resume", `/ui/instances/${seg(n0)}/resume`, {})],
  "POST /ui/instances/{id}/rerun": ({ n1 }) => [form("ui rerun", `/ui/instances/${seg(n1)}/rerun`, {})],
  "POST /ui/instances/{id}/fork": ({ r, n0, n2 }) => [form("ui fork", `/ui/instances/pf-${r}/fork`, { fromActivityId: n0 }), form("ui fork id", `/ui/instances/${seg(n2)}/fork`, { fromActivityId: n0 })],
  "POST /ui/instances/{id}/messages": ({ r, v2, n2, n3 }) => [
    form("ui message", `/ui/instances/pf-${r}/messages`, { channel: n3, data: text(v2) }),
    form("ui message id", `/ui/instances/${seg(n2)}/messages`, { channel: "p-feed", data: text(v2) }),
  ],
  "GET /ui/workflows": ({ n1 }) => [req("ui workflows", `/ui/workflows?${seg(n1)}=1`)],
  "GET /ui/workflows/{name}/start": ({ n2 }) => [req("ui start form", `/ui/workflows/${seg(n2)}/start`)],
  "POST /ui/workflows/{name}/start": ({ v3, n0, n3, customId }) => [
    form("ui start", "/ui/workflows/p_echo/start", { __json: text(v3), ...(customId ? { instanceId: n0 } : {}) }),
    form("ui start unknown", `/ui/workflows/${seg(n3)}/start`, { __json: text(v3) }),
  ],
  "GET /ui/channels": ({ n3 }) => [req("ui channels", `/ui/channels?notice=${seg(n3)}`)],
  "POST /ui/channels/publish": ({ v0, n1 }) => [form("ui publish", "/ui/channels/publish", { channel: n1, data: text(v0) })],
  "GET /ui/channels/{name}": ({ n0 }) => [req("ui channel", `/ui/channels/${seg(n0)}`)],
  "GET /ui/schedules": ({ n1 }) => [req("ui schedules", `/ui/schedules?${seg(n1)}=1`)],
  "GET /ui/bulk": ({ n0, n1, n2 }) => [req("ui bulk dry run", `/ui/bulk?action=cancel&workflow=${seg(n0)}&q=${seg(n1)}&status=${seg(n2)}`), req("ui bulk bad action", `/ui/bulk?action=${seg(n2)}`)],
  "POST /ui/bulk": ({ r, n0, n1, n3 }) => [
    form("ui bulk", "/ui/bulk", { action: "cancel", workflow: `p-none-${r}`, search: n1, requestId: n3 }),
    form("ui bulk hostile", "/ui/bulk", { action: n0, status: n1, startedAfter: n3, workflow: n0 }),
  ],
  "GET /ui/operations": ({ n0 }) => [req("ui operations", `/ui/operations?${seg(n0)}=1`)],
  "GET /ui/operations/{id}": ({ n2 }) => [req("ui operation", `/ui/operations/${seg(n2)}?notice=${seg(n2)}`)],
  "POST /ui/schedules/{workflow}/pause": ({ n0 }) => [form("ui pause", `/ui/schedules/${seg(n0)}/pause`, {})],
  "POST /ui/schedules/{workflow}/resume": ({ n1 }) => [form("ui resume schedule", `/ui/schedules/${seg(n1)}/resume`, {})],
  "POST /ui/schedules/{workflow}/trigger": ({ n2 }) => [form("ui trigger", `/ui/schedules/${seg(n2)}/trigger`, {})],
  "GET /ui/events": ({ n1 }) => [req("ui events", "/ui/events"), req("ui events cursor", `/ui/events?cursor=${seg(n1)}`)],
  "GET /ui/instances/{id}/history.json": ({ r, n3 }) => [req("ui history download", `/ui/instances/ph-${r}/history.json`), req("ui history download id", `/ui/instances/${seg(n3)}/history.json`)],
  "GET /ui/outbox": ({ n0, n2, n3 }) => [req("ui outbox", `/ui/outbox?status=${seg(n0)}&cursor=${seg(n2)}&notice=${seg(n3)}`)],
  "POST /ui/outbox/{eventId}/redeliver": ({ n3 }) => [form("ui redeliver", `/ui/outbox/${seg(n3)}/redeliver`, {})],
  "POST /ui/outbox/{eventId}/discard": ({ n0 }) => [form("ui discard", `/ui/outbox/${seg(n0)}/discard`, {})],
};

it("hostile values in every slot, while valid traffic flows: valid work completes, sweeps succeed, nothing 5xx, nothing leaks, nothing left runnable", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        values: fc.array(hostileValue, { minLength: 4, maxLength: 4 }),
        names: fc.array(hostileName, { minLength: 4, maxLength: 4 }),
        metadata: hostileValue,
        customId: fc.boolean(),
      }),
      async ({ values, names, metadata, customId }) => {
        const r = ++run;
        const [v0, v1, v2, v3] = values as [unknown, unknown, unknown, unknown];
        const [n0, n1, n2, n3] = names as [string, string, string, string];
        const validIds: string[] = [];

        // valid traffic, started first so hostile requests race with its steps
        const validEcho = await t.edda.start("p_echo", { valid: r });
        const validWaiter = await t.edda.start("p_waiter", null, { instanceId: `pw-${r}` });
        const validListener = await t.edda.start("p_listener", `valid.${r}`, { instanceId: `pl-${r}` });
        validIds.push(validEcho.instanceId, validWaiter.instanceId, validListener.instanceId);
        const hostileWaiter = await t.edda.start("p_waiter", null, { instanceId: `ph-${r}` });
        const hostileWaiter2 = await t.edda.start("p_waiter", null, { instanceId: `ph2-${r}` });
        const feeder = await t.edda.start("p_feed", null, { instanceId: `pf-${r}` });
        const validHooked = await t.edda.start("p_hooked", null, { instanceId: `pk-${r}` });
        const hostileHooked = await t.edda.start("p_hooked", null, { instanceId: `pkh-${r}` });
        validIds.push(validHooked.instanceId);
        const hooks = { valid: await hookPath(validHooked.instanceId), hostile: await hookPath(hostileHooked.instanceId) };

        const h: Hostile = { r, v0, v1, v2, v3, n0, n1, n2, n3, metadata, customId, hooks };
        const requests = Object.values(ROUTES).flatMap((make) => make(h));
        const outcomes = new Map<string, { status: number; body: unknown }>();
        await Promise.all(requests.map(async (q) => outcomes.set(q.what, await call(q.what, q.path, await q.init()))));
        // valid reads of the newer routes answer while hostile traffic flows; a signed sweep amid it completes every task
        for (const what of ["valid schedules", "valid dead letters", "ui list"]) expect(outcomes.get(what)!.status, what).toBe(200);
        expect(outcomes.get("sweep")!.status).toBe(200);
        expect((outcomes.get("sweep")!.body as SweepReport).failures).toEqual([]);
        for (const what of ["step unsigned", "sweep unsigned", "webhook unsigned", "webhook wrong secret"]) expect(outcomes.get(what)!.status, what).toBe(401);
        expect(outcomes.get("valid webhook")!.status).toBe(202);
        // a per-wait URL applies once: of two POSTs racing to it one is accepted, the other is 410 Gone
        const hookCalls = [outcomes.get("valid hook call")!.status, outcomes.get("hook replay")!.status].sort();
        expect(hookCalls).toEqual([202, 410]);
        for (const [what, status] of [["hook unknown token", 404], ["hook huge body", 413], ["hook wrong method", 404]] as const) expect(outcomes.get(what)!.status, what).toBe(status);

        // hostile values through the code paths: publish, sendTo (in a workflow), sendEvent (to this app)
        await inCode("edda.publish", () => t.edda.publish(n0, v3, { metadata: { m: v2 } }));
        await inCode("edda.publish feed", () => t.edda.publish("p-feed", v0));
        const streamed = await inCode("stream", () => t.edda.start("p_streamer", v1, { instanceId: `ps-${r}` }));
        const senderStarted = await inCode("sendTo", () => t.edda.start("p_sender", { target: `ph2-${r}`, data: v2, channel: n1 }));
        await inCode("sendEvent", () =>
          sendEvent(
            { type: "p.order", source: "/poison-code", id: `hc-${r}`, data: v1, extensions: typeof n2 === "string" && /^[a-z0-9]{1,20}$/.test(n2) ? { [n2]: n3 } : {} },
            { brokerUrl: "http://edda.test/events", fetch: (input, init) => Promise.resolve(t.edda.app.request(String(input), { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${TOKEN}` } })) },
          ),
        );

        const reports: SweepReport[] = [];
        await settle(reports);

        // sweeps: every task ran; no row failure names valid work
        for (const rep of reports) {
          expect(rep.failures, JSON.stringify(rep.failures)).toEqual([]);
          for (const f of rep.rowFailures) expect(validIds).not.toContain(f.instanceId);
        }

        // valid traffic completed with exactly its outputs
        expect((await t.waitFor(validEcho.instanceId)).output).toEqual({ valid: r });
        expect((await t.waitFor(validWaiter.instanceId)).output).toEqual({ ok: r });
        expect((await t.waitFor(validListener.instanceId)).output).toEqual({ ok: r });
        expect([{ ok: "hook" }, { replayed: true }]).toContainEqual((await t.waitFor(validHooked.instanceId)).output);
        const hostileHook = outcomes.get("hook data")!;
        if (hostileHook.status === 202) expect(viaJson((await t.waitFor(hostileHooked.instanceId)).output)).toEqual(viaJson(JSON.parse(text(v0))));
        else expect((await t.edda.getInstance(hostileHooked.instanceId))!.status).toBe("waiting_for_webhook");

        // accepted hostile values round-trip unchanged
        const startInput = outcomes.get("start input");
        const messageData = outcomes.get("message data");
        if (startInput!.status === 201) {
          const id = (startInput!.body as { instanceId: string }).instanceId;
          const done = await t.waitFor(id);
          expect(viaJson(done.output)).toEqual(viaJson(v0));
        }
        if (messageData!.status === 202) expect(viaJson((await t.waitFor(hostileWaiter.instanceId)).output)).toEqual(viaJson(v1));
        if (senderStarted) expect(viaJson((await t.waitFor(hostileWaiter2.instanceId)).output)).toEqual(viaJson(v2));
        expect(["completed", "waiting_for_message"]).toContain((await t.edda.getInstance(feeder.instanceId))!.status);

        // hostile stream items: stored and read back exactly, or refused with a typed error
        if (streamed) {
          const out = (await t.waitFor(`ps-${r}`)).output as { wrote: string; emitted: string };
          expect(["streamed", "StreamLimitError"]).toContain(out.wrote);
          expect(["emitted", "StreamLimitError"]).toContain(out.emitted);
          const sse = (await call("stream read", `/instances/ps-${r}/stream`)).body as string;
          const events = sse.split("\n\n").filter((e) => e.startsWith("event:"));
          const field = (e: string, name: string) => e.split("\n").find((l) => l.startsWith(`${name}: `))!.slice(name.length + 2);
          const data = (kind: string) => events.filter((e) => field(e, "event") === kind).map((e) => JSON.parse(field(e, "data")) as { data: unknown; topic: string; encoding?: string });
          if (out.wrote === "streamed") {
            expect(viaJson(data("chunk").find((c) => c.topic === "v")!.data)).toEqual(viaJson(v1));
            expect(data("chunk").find((c) => c.topic === "bytes")).toMatchObject({ encoding: "base64", data: "AP/+gA==" });
          }
          if (out.emitted === "emitted") expect(viaJson(data("emit")[0]!.data)).toEqual(viaJson(v1));
          expect(events.at(-1)).toContain('"status":"completed"');
        }

        // nothing left runnable: every instance is finished, waiting, or visibly set aside
        const restless = await queryRows<{ instance_id: string; status: string }>(
          t.database.db,
          sql`SELECT instance_id, status FROM workflow_instances WHERE status IN ('running', 'compensating')`,
        );
        expect(restless).toEqual([]);
        const quarantined = await queryRows<{ instance_id: string; failure_data: string }>(t.database.db, sql`SELECT instance_id, failure_data FROM workflow_instances WHERE status = 'quarantined'`);
        for (const q of quarantined) {
          expect(validIds).not.toContain(q.instance_id);
          expect(JSON.parse(q.failure_data)).toHaveProperty("message");
        }
      },
    ),
    { numRuns: RUNS, endOnFailure: true },
  );
  expect(responses.some((r) => r.status === 202)).toBe(true);
  // the hostile calls reached their handlers: MCP and the viewer answered, not only the auth layer
  expect(responses.some((r) => r.what === "mcp tool call" && r.status === 200)).toBe(true);
  expect(responses.some((r) => r.what === "ui instance" && r.status === 404)).toBe(true);
  expect(responses.some((r) => r.status >= 400)).toBe(true);
}, 120_000);

it("sends hostile requests to every route the app serves: a route missing from the table fails here", () => {
  const served = endpointsOf(t.edda.app).map(({ method, path }) => `${method.toUpperCase()} ${path}`);
  expect(served.length).toBeGreaterThan(30);
  expect(served.filter((route) => !(route in ROUTES)), "routes without hostile requests").toEqual([]);
  expect(Object.keys(ROUTES).filter((route) => !served.includes(route)), "table entries for routes the app does not serve").toEqual([]);
  for (const [route, make] of Object.entries(ROUTES)) expect(make({ r: 0, v0: 0, v1: 0, v2: 0, v3: 0, n0: "a", n1: "b", n2: "c", n3: "d", metadata: null, customId: false, hooks: { valid: "/hooks/a", hostile: "/hooks/b" } }).length, route).toBeGreaterThan(0);
});
