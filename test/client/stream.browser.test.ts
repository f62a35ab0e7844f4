// The client's stream iterator in a real browser: Debian's Chromium via
// playwright-core loads the esbuild browser bundle of `edda-edge/client` from
// the app's origin (real Postgres, LISTEN-woken readers) and reads
// `run.stream()` of a summarize instance: every token once and in order, the
// workflow's emit, then the end. Then the connection is cut under it twice —
// the server side destroys the first response's socket after 50 events (the
// browser's fetch sees a network error mid-body), and Chromium itself fails
// the first resume (`page.route` aborts it, as a dropped network would) — and
// the iterator resumes with Last-Event-ID: nothing missed, nothing twice.
import { join } from "node:path";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { build } from "esbuild";
import { chromium, type BrowserContext } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { summarize, summaryToken } from "../../functions/workflows/summarize.ts";
import type { StreamEvent } from "../../src/client/index.ts";
import { serveTestApp, type Listening } from "../support/listen.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { chromiumLaunch } from "../support/chromium.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const TOKEN = "stream-browser-token";
const TOKENS = 120;
const CUT_AFTER = 50;

let t: TestApp;
let server: Listening;
let context: BrowserContext;
let profile: string;
let bundle: string;
/** Last-Event-ID of every stream request the server answered (null: none). */
const resumes: (string | null)[] = [];

/** The app's SSE response, its socket destroyed after `n` events (the body errors: @hono/node-server destroys the response). */
function cutAfter(res: Promise<Response>, n: number): Response {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    async start(ctl) {
      const reader = (await res).body!.getReader();
      const decoder = new TextDecoder();
      const encoder = new TextEncoder();
      let buf = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return ctl.close();
        buf += decoder.decode(value, { stream: true });
        for (let end = buf.indexOf("\n\n"); end >= 0; end = buf.indexOf("\n\n")) {
          const block = buf.slice(0, end + 2);
          buf = buf.slice(end + 2);
          ctl.enqueue(encoder.encode(block));
          if (/^id: /m.test(block) && ++sent === n) {
            await reader.cancel();
            // Let the events go out before the socket is destroyed.
            await new Promise((r) => setTimeout(r, 100));
            return ctl.error(new Error("connection cut"));
          }
        }
      }
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
}

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("postgres-js", "client_stream_browser"), { workflows: [summarize], apiToken: TOKEN });
  bundle = (await build({ entryPoints: [join(ROOT, "src/client/index.ts")], bundle: true, platform: "browser", format: "esm", write: false, minify: true })).outputFiles[0]!.text;
  server = await serveTestApp(t, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/__client/page.html") return new Response("<!doctype html><title>stream</title>", { headers: { "content-type": "text/html" } });
    if (path === "/__client/client.js") return new Response(bundle, { headers: { "content-type": "text/javascript" } });
    const stream = /^\/instances\/([^/]+)\/stream$/.exec(path);
    if (!stream) return undefined;
    const resume = req.headers.get("last-event-id");
    resumes.push(resume);
    return stream[1]!.startsWith("cut-") && resume === null ? cutAfter(Promise.resolve(t.edda.app.fetch(req)), CUT_AFTER) : undefined;
  });
  profile = mkdtempSync(join(tmpdir(), "edda-stream-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    ...(await chromiumLaunch()),
    headless: true,
    chromiumSandbox: false,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}, 120_000);

afterAll(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await server?.close();
});

/** Start a summarize instance from the page and read `run.stream()` to its end, in Chromium. */
async function readInBrowser(instanceId: string): Promise<{ userAgent: string; events: StreamEvent[]; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  try {
    await page.goto(`${server.url}/__client/page.html`);
    // A string, not a function: the test runner rewrites `import()` in this file's functions.
    const r = await page.evaluate<{ userAgent: string; events: StreamEvent[] }>(`(async () => {
      const { createClient } = await import("/__client/client.js");
      const edda = createClient({ baseUrl: location.origin, token: ${JSON.stringify(TOKEN)} });
      const run = await edda.start("summarize", { tokens: ${TOKENS} }, { instanceId: ${JSON.stringify(instanceId)} });
      const events = [];
      for await (const ev of run.stream()) events.push(ev);
      return { userAgent: navigator.userAgent, events };
    })()`);
    return { ...r, errors };
  } finally {
    await page.close();
  }
}

function expectWholeStream(events: StreamEvent[]) {
  const items = events.flatMap((e) => (e.kind === "end" ? [] : [e]));
  expect(items.map((e) => e.data)).toEqual([...Array.from({ length: TOKENS }, (_, i) => summaryToken(i)), "done"]);
  expect(items.slice(0, TOKENS).every((e) => e.kind === "chunk" && e.topic === "tokens" && e.attempt === 1)).toBe(true);
  expect(items.at(-1)).toMatchObject({ kind: "emit", topic: "status", source: "emit:1" });
  const seqs = items.map((e) => e.seq);
  expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
  expect(events.at(-1)).toEqual({ kind: "end", status: "completed", lastSeq: seqs.at(-1) });
  expect(events.filter((e) => e.kind === "end")).toHaveLength(1);
  return seqs;
}

it("run.stream() in Chromium: every token once and in order, the emit, the end", { timeout: 60_000 }, async () => {
  const r = await readInBrowser("whole-1");
  expect(r.userAgent).toMatch(/Chrome\//);
  expectWholeStream(r.events);
  expect(r.errors).toEqual([]);
});

it("run.stream() in Chromium resumes after the connection is cut mid-stream and a resume fails: nothing missed, nothing twice", { timeout: 60_000 }, async () => {
  resumes.length = 0;
  let resumeTries = 0;
  // The first resume dies in the browser's network stack (as when the network is down); later ones go through.
  await context.route("**/instances/cut-1/stream", (route) => {
    if (route.request().headers()["last-event-id"] !== undefined && resumeTries++ === 0) return route.abort("internetdisconnected");
    return route.continue();
  });
  try {
    const r = await readInBrowser("cut-1");
    const seqs = expectWholeStream(r.events);
    expect(resumeTries).toBeGreaterThanOrEqual(2);
    // The server saw the first connection, then (after the aborted try) a resume after the 50th event.
    expect(resumes[0]).toBeNull();
    expect(resumes[1]).toBe(String(seqs[CUT_AFTER - 1]));
    expect(r.errors).toEqual([]);
  } finally {
    await context.unroute("**/instances/cut-1/stream");
  }
});
