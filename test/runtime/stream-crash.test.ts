// A worker killed mid-stream leaves a consistent stream, with real processes
// on real Postgres: worker A (a Node server) streams slowly and is killed
// with SIGKILL; once its 2 s lease expires worker B's sweeper resumes the
// instance and the activity runs again. A reader of B's SSE stream sees A's
// items (attempt 1), then a retry marker, then every item of the new
// execution once and in order, then the workflow's emit and the end event.
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import { queryRows } from "../../src/storage/database.ts";
import { readSse } from "../support/sse.ts";
import { api, waitForStatus } from "./processes.ts";
import { startWorkerPair } from "./worker-setup.ts";

const SCRIPT = join(import.meta.dirname, "fixtures", "stream-worker.ts");
const TOKENS = 40;
const p = startWorkerPair("stream_crash", SCRIPT, { secret: "stream-crash-secret", slowMs: 200 });

const chunks = async (id: string) => (await queryRows<{ n: number }>(p.db.db, sql`SELECT count(*)::int AS n FROM workflow_stream_chunks WHERE instance_id = ${id}`))[0]!.n;

it("a worker killed mid-stream: its items, a retry marker, then the new execution's items once and in order", { timeout: 60_000 }, async () => {
  const started = await api<{ instanceId: string }>(p.a.url, "POST", "/workflows/stream_crash/instances", { input: TOKENS, instanceId: "crash-stream-1" });
  expect(started.status).toBe(201);
  const deadline = Date.now() + 15_000;
  while ((await chunks("crash-stream-1")) < 5) {
    if (Date.now() > deadline) throw new Error(`worker A never streamed:\n${p.a.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await p.a.stop("SIGKILL");
  const done = await waitForStatus(p.b.url, "crash-stream-1", ["completed", "failed"], 30_000);
  expect(done.status).toBe("completed");
  expect(done.output).toEqual({ tokens: TOKENS, by: "worker-b" });

  const res = await fetch(`${p.b.url}/instances/crash-stream-1/stream`);
  expect(res.status).toBe(200);
  const events = await readSse(res.body!);
  const items = events.filter((e) => e.event !== "end").map((e) => ({ event: e.event, id: Number(e.id), ...(JSON.parse(e.data) as { attempt: number; data: { i: number; by: string } | string }) }));
  const ids = items.map((i) => i.id);
  expect(ids).toEqual([...ids].sort((x, y) => x - y));
  expect(new Set(ids).size).toBe(ids.length);
  const marker = items.findIndex((i) => i.event === "retry");
  expect(marker).toBeGreaterThanOrEqual(5);
  const before = items.slice(0, marker);
  const after = items.slice(marker + 1);
  // A's items: a prefix of its text, in order.
  expect(before.map((i) => i.data)).toEqual(before.map((_, n) => ({ i: n, by: "worker-a" })));
  expect(before.length).toBeLessThan(TOKENS);
  // The new execution: every item once, in order, then the workflow's emit.
  expect(after.slice(0, TOKENS).map((i) => i.data)).toEqual(Array.from({ length: TOKENS }, (_, n) => ({ i: n, by: "worker-b" })));
  expect(after.slice(TOKENS)).toMatchObject([{ event: "emit", data: "done" }]);
  expect(events.at(-1)).toMatchObject({ event: "end" });
  expect(JSON.parse(events.at(-1)!.data)).toEqual({ status: "completed", lastSeq: ids.at(-1) });
});
