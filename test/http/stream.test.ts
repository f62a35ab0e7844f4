// GET /instances/:id/stream on real Postgres: 50 concurrent readers of one
// live instance each get every item once and in order, and hold no database
// connection each (one shared LISTEN); a reader that disconnects and resumes
// with Last-Event-ID misses nothing and gets nothing twice; bad resumes are
// 400, unknown instances 404, and valid traffic flows after them.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, emit, workflow } from "../../src/index.ts";
import { engineOf } from "../../src/edda.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEdda } from "../../src/edda.ts";
import { serveNode } from "../../src/platform/node.ts";
import { summarize } from "../../functions/workflows/summarize.ts";
import { summarizeStreamFlow } from "../runtime/stream-flow.ts";
import { freshPostgres, makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { readSse, sseEvents, type SseEvent } from "../support/sse.ts";
import { createClient, type StreamEvent } from "../../src/client/index.ts";

const TOKENS = 150;
const ticker = activity(
  "ticker",
  async (ctx, n: number) => {
    for (let i = 0; i < n; i++) {
      ctx.stream.write({ i }, { topic: i % 2 ? "odd" : "even" });
      await new Promise((r) => setTimeout(r, 4));
    }
    return n;
  },
  { transactional: false },
);
const ticking = workflow("ticking", async (ctx, n: number) => {
  await emit(ctx, "start");
  await ticker(ctx, n);
  await emit(ctx, "done");
  return n;
});

let database: Database;
let t: TestApp;
beforeAll(async () => {
  database = await openTestDatabase("postgres-js", "stream_http");
  t = makeTestApp(database, { workflows: [ticking] });
}, 120_000);
afterAll(async () => {
  await t?.edda.close();
  await database?.close();
});

const open = (id: string, headers: Record<string, string> = {}, query = "") => t.edda.app.request(`http://localhost/instances/${id}/stream${query}`, { headers });
const items = (evs: SseEvent[]) => evs.filter((e) => e.event !== "end");
const ids = (evs: SseEvent[]) => items(evs).map((e) => Number(e.id));
const expected = () => ["start", ...Array.from({ length: TOKENS }, (_, i) => ({ i })), "done"];
const payloads = (evs: SseEvent[]) => items(evs).map((e) => (JSON.parse(e.data) as { data: unknown }).data);

it("50 concurrent readers of a live instance: every item once, in order, then end; no connection per reader", async () => {
  const { instanceId } = await t.edda.start("ticking", TOKENS);
  const responses = await Promise.all(Array.from({ length: 50 }, async () => open(instanceId)));
  for (const r of responses) {
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/event-stream");
  }
  const reading = Promise.all(responses.map((r) => readSse(r.body!)));
  // While they read: the backends of this database stay within the pool and the one listener.
  await new Promise((r) => setTimeout(r, 200));
  const engine = await engineOf(t.edda);
  expect(engine.streamHub!.readerCount).toBeGreaterThan(0);
  const backends = await queryRows<{ n: number }>(database.db, sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()`);
  expect(backends[0]!.n).toBeLessThanOrEqual(10 + 1);
  const all = await reading;
  for (const evs of all) {
    expect(payloads(evs)).toEqual(expected());
    const seqs = ids(evs);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(evs.at(-1)).toMatchObject({ event: "end" });
    expect(JSON.parse(evs.at(-1)!.data)).toEqual({ status: "completed", lastSeq: seqs.at(-1) });
  }
  expect(engine.streamHub!.readerCount).toBe(0);
});

it("disconnect and resume with Last-Event-ID, several times mid-stream: nothing missed, nothing twice", async () => {
  const { instanceId } = await t.edda.start("ticking", TOKENS);
  const got: SseEvent[] = [];
  let last = "";
  for (let round = 0; round < 50; round++) {
    const res = await open(instanceId, last ? { "last-event-id": last } : {});
    expect(res.status).toBe(200);
    let n = 0;
    for await (const ev of sseEvents(res.body!)) {
      got.push(ev);
      if (ev.id) last = ev.id;
      if (ev.event === "end" || ++n >= 17) break; // leaves the response mid-stream
    }
    if (got.at(-1)?.event === "end") break;
  }
  expect(got.at(-1)?.event).toBe("end");
  expect(payloads(got)).toEqual(expected());
  const seqs = ids(got);
  expect(new Set(seqs).size).toBe(seqs.length);
  // ?after= is the same resume for clients that cannot set headers; a topic filter keeps its topic.
  const rest = await readSse((await open(instanceId, {}, `?after=${seqs[100]}&topic=odd`)).body!);
  expect(payloads(rest)).toEqual(expected().slice(101).filter((p) => typeof p === "object" && p.i % 2 === 1));
});

it("unknown instances are 404, and valid readers are unaffected by refused ones (the 400s for bad resumes: stream-requests.unit.test.ts)", async () => {
  const { instanceId } = await t.edda.start("ticking", 3);
  expect((await open(instanceId, { "last-event-id": "not-a-number" })).status).toBe(400);
  expect((await open("no-such-instance")).status).toBe(404);
  const evs = await readSse((await open(instanceId)).body!);
  expect(payloads(evs)).toEqual(["start", { i: 0 }, { i: 1 }, { i: 2 }, "done"]);
});

it("the client's run.stream(): every item once in order across connections the network cuts, then end", async () => {
  let connections = 0;
  // Each response is cut after a few kilobytes, mid-event: the iterator reconnects with Last-Event-ID.
  const cutting = async (input: string, init: RequestInit): Promise<Response> => {
    const res = await t.edda.app.request(input, init);
    if (!input.includes("/stream")) return res;
    connections++;
    let sent = 0;
    const reader = res.body!.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done || sent > 1500) {
          await reader.cancel();
          controller.error(new TypeError("network connection lost"));
          return;
        }
        sent += value.byteLength;
        controller.enqueue(value);
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  const client = createClient<[typeof ticking]>({ baseUrl: "http://localhost", fetch: cutting });
  const run = await client.start("ticking", TOKENS);
  const got: StreamEvent[] = [];
  for await (const ev of run.stream()) got.push(ev);
  expect(connections).toBeGreaterThan(2);
  const items = got.flatMap((e) => (e.kind === "end" ? [] : [e]));
  expect(items.map((e) => e.data)).toEqual(expected());
  expect(new Set(items.map((e) => e.seq)).size).toBe(items.length);
  expect(got.at(-1)).toMatchObject({ kind: "end", status: "completed" });
  await expect(async () => {
    for await (const _ of client.stream("no-such-instance")) void _;
  }).rejects.toMatchObject({ name: "EddaApiError", status: 404 });
});

it("a database opened per request (Workers' mode): one response streams a live instance to its end; the database closes after it", async () => {
  const pg = await freshPostgres("stream_per_request");
  const runner = makeTestApp(pg.open(), { workflows: [ticking] });
  let closed = 0;
  const perRequest = createEdda({
    workflows: [ticking],
    secret: "test-secret",
    database: () => {
      const d = pg.open();
      return { ...d, close: async () => ((closed += 1), await d.close()) };
    },
  });
  try {
    const { instanceId } = await runner.edda.start("ticking", 60);
    const background: Promise<unknown>[] = [];
    const res = await perRequest.fetch(new Request(`http://localhost/instances/${instanceId}/stream`), {}, { waitUntil: (p: Promise<unknown>) => void background.push(p) });
    expect(res.status).toBe(200);
    // Readers poll here (no LISTEN on a per-request database); the one response goes on past the handler.
    const evs: SseEvent[] = [];
    for await (const ev of sseEvents(res.body!)) {
      evs.push(ev);
      if (ev.event === "end") expect(closed).toBe(0);
    }
    expect(payloads(evs)).toEqual(["start", ...Array.from({ length: 60 }, (_, i) => ({ i })), "done"]);
    expect(evs.at(-1)).toMatchObject({ event: "end" });
    await Promise.all(background);
    expect(closed).toBe(1);
  } finally {
    await runner.edda.close();
    await runner.database.close();
  }
});

it("serveNode's default without DATABASE_URL (and npm start's with EDDA_EMBEDDED=pglite), embedded PGlite: summarize read with the client iterator, woken by PGlite's LISTEN", { timeout: 120_000 }, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "edda-stream-pglite-"));
  const warn = console.warn;
  console.warn = () => {}; // the unauthenticated-loopback notice
  // The template cache serveNode uses (initdb once, then a copy), kept where later runs find it.
  const env = { EDDA_PGLITE_TEMPLATE_CACHE: join(tmpdir(), "edda-edge-test-pglite-template") };
  const node = await serveNode({ workflows: [summarize], port: 0, dataDir, sweepIntervalMs: 0, env }).finally(() => (console.warn = warn));
  try {
    expect(node.database.driver).toBe("pglite");
    expect(await (await engineOf(node.edda)).streamHub!.live()).toBe(true);
    await summarizeStreamFlow(`http://127.0.0.1:${node.port}`, "pglite-stream");
  } finally {
    await node.close();
    await rm(dataDir, { recursive: true, force: true });
  }
});

it("the viewer's instance page carries the live stream, and its session route serves the same events", async () => {
  const { instanceId } = await t.edda.start("ticking", 2);
  await t.waitFor(instanceId);
  const page = await (await t.edda.app.request(`http://localhost/ui/instances/${instanceId}`)).text();
  expect(page).toContain(`data-stream="/ui/instances/${instanceId}/stream"`);
  expect(page).toContain("new EventSource(box.dataset.stream)");
  const evs = await readSse((await t.edda.app.request(`http://localhost/ui/instances/${instanceId}/stream`)).body!);
  expect(payloads(evs)).toEqual(["start", { i: 0 }, { i: 1 }, "done"]);
  expect((await t.edda.app.request("http://localhost/ui/instances/no-such-instance/stream")).status).toBe(404);
});
