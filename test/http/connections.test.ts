// Bounded connections on the real Node adapter (serveNode, real Postgres),
// issue 42: 1,000 uploads that drip a byte a second leave /healthz answering
// in under 100 ms and are cut off (408) once EDDA_BODY_TIMEOUT_SECONDS has
// passed, and event streams past EDDA_MAX_STREAMS are refused with 503 and
// Retry-After while the ones open keep flowing. After each, valid traffic
// flows (a start runs to its end, a message reaches a waiting instance) and
// the sweep succeeds.
import { spawn } from "node:child_process";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, waitMessage, workflow } from "../../src/index.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { freshPostgres } from "../support/engine.ts";

const add = activity("cn_add", async (_ctx, n: number) => n + 1);
const inc = workflow("cn_inc", { input: z.number() }, async (ctx, n) => add(ctx, n));
const waits = workflow("cn_waits", async (ctx) => (await waitMessage(ctx, "cn-go")).data);

const TOKEN = "cn-token";
const auth = { authorization: `Bearer ${TOKEN}` };
let server: NodeServer;
let base: string;

beforeAll(async () => {
  const db = await freshPostgres("connections");
  server = await serveNode({
    workflows: [inc, waits],
    port: 0,
    viewer: false,
    sweepIntervalMs: 0,
    env: { DATABASE_URL: db.url, EDDA_API_TOKEN: TOKEN, EDDA_SECRET: "cn-secret", EDDA_BODY_TIMEOUT_SECONDS: "6", EDDA_MAX_STREAMS: "3" },
  });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(async () => {
  await server?.close();
});

/** 1,000 uploads that promise 100 kB and send a byte a second; prints "connected", then a summary once the server closed them all. */
const SLOW_CLIENT = `
const net = require("node:net");
const [port, token] = process.argv.slice(1);
const sockets = [];
let closed = 0, answered408 = 0;
(async () => {
  for (let i = 0; i < 1000; i++) {
    const s = net.connect(Number(port), "127.0.0.1");
    let got = "";
    s.on("data", (d) => (got += d));
    s.on("error", () => {});
    s.on("close", () => {
      closed++;
      if (got.startsWith("HTTP/1.1 408")) answered408++;
      if (closed === 1000) console.log(JSON.stringify({ closed, answered408 }));
    });
    s.write("POST /workflows/cn_inc/instances HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nAuthorization: Bearer " + token + "\\r\\nContent-Type: application/json\\r\\nContent-Length: 100000\\r\\n\\r\\n{");
    sockets.push(s);
    if (i % 50 === 49) await new Promise((r) => s.once("connect", r));
  }
  console.log("connected");
  setInterval(() => { for (const s of sockets) if (!s.destroyed) s.write(" "); }, 1000);
})();
`;

/** Valid traffic after the abuse: a start completes, and the sweep runs clean. */
async function validTrafficFlows(id: string) {
  const res = await fetch(`${base}/workflows/cn_inc/instances`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ input: 41, instanceId: id }) });
  expect(res.status).toBe(201);
  const result = await fetch(`${base}/instances/${id}/result?wait=10`, { headers: auth });
  expect(await result.json()).toMatchObject({ status: "completed", output: 42 });
  const swept = await server.edda.sweep();
  expect(swept).toBeTypeOf("object");
}

describe("bounded connections (issue 42)", () => {
  it("1,000 slow uploads: /healthz stays under 100 ms, and each upload is cut off with 408 after the body timeout", { timeout: 60_000 }, async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200); // warm: the pool's first connection is not what is measured
    // The uploads come from another process, as they would: their own writes do not count against this one's event loop.
    const child = spawn(process.execPath, ["-e", SLOW_CLIENT, String(server.port), TOKEN], { stdio: ["ignore", "pipe", "inherit"] });
    const lines: string[] = [];
    const waiters = new Set<() => void>();
    child.stdout.on("data", (d: Buffer) => {
      lines.push(...d.toString().split("\n").filter(Boolean));
      for (const w of waiters) w();
    });
    const line = (want: string) =>
      new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no "${want}" from the slow client (got ${lines.join(" | ")})`)), 30_000);
        const look = () => {
          const hit = lines.find((l) => l.startsWith(want));
          if (!hit) return;
          clearTimeout(timer);
          waiters.delete(look);
          resolve(hit);
        };
        waiters.add(look);
        look();
      });
    try {
      await line("connected");
      await new Promise((r) => setTimeout(r, 1000));
      const times: number[] = [];
      for (let i = 0; i < 10; i++) {
        const t0 = performance.now();
        const res = await fetch(`${base}/healthz`);
        expect(res.status).toBe(200);
        await res.arrayBuffer();
        times.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 100));
      }
      // The median is the claim; single spikes on this shared 2-core machine come from other processes' CPU, not from the uploads
      // (a standalone run with no other load: every call under 30 ms). None waits behind the uploads (that would be seconds).
      const sorted = [...times].sort((a, b) => a - b);
      const shown = `healthz ms: ${times.map(Math.round).join(" ")}`;
      expect(sorted[Math.floor(sorted.length / 2)], shown).toBeLessThan(100);
      expect(sorted.at(-1), shown).toBeLessThan(1000);
      console.log(shown);
      // Past the 6 s bound (checked every 1.5 s), the server answers each dripping upload 408 and closes it.
      const done = JSON.parse((await line("{")).trim()) as { closed: number; answered408: number };
      expect(done).toEqual({ closed: 1000, answered408: 1000 });
    } finally {
      child.kill();
    }
    await validTrafficFlows("cn-after-slow");
  });

  it("event streams past EDDA_MAX_STREAMS get 503 with Retry-After; the open ones keep flowing, and a freed slot is taken again", async () => {
    const started = await fetch(`${base}/workflows/cn_waits/instances`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ instanceId: "cn-waiting" }) });
    expect(started.status).toBe(201);
    const open = async () => {
      const abort = new AbortController();
      const res = await fetch(`${base}/instances/cn-waiting/stream`, { headers: auth, signal: abort.signal });
      return { res, abort };
    };
    const streams = [await open(), await open(), await open()];
    for (const s of streams) expect(s.res.status).toBe(200);
    const refused = await open();
    expect(refused.res.status).toBe(503);
    expect(refused.res.headers.get("retry-after")).toBe("5");
    expect(refused.res.headers.get("content-type")).toContain("application/problem+json");
    expect(await refused.res.json()).toMatchObject({ status: 503, error_type: "ServiceUnavailable" });

    // A stream closed by its client gives its slot back.
    streams[0]!.abort.abort();
    let again = await open();
    for (let i = 0; i < 50 && again.res.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 50));
      again = await open();
    }
    expect(again.res.status).toBe(200);
    streams[0] = again;

    // The open streams still carry the instance to its end: a message finishes it, each gets `end`.
    const sent = await fetch(`${base}/instances/cn-waiting/messages`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ channel: "cn-go", data: "went" }) });
    expect(sent.status).toBe(202);
    for (const s of streams) {
      const text = await s.res.text();
      expect(text).toContain("event: end");
      expect(text).toContain('"status":"completed"');
    }
    // Ended streams free their slots: three more open at once.
    const next = [await open(), await open(), await open()];
    for (const s of next) {
      expect(s.res.status).toBe(200);
      expect(await s.res.text()).toContain("event: end");
    }
    await validTrafficFlows("cn-after-streams");
  });
});
