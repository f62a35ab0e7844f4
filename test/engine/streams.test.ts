// Realtime streams on PGlite and real Postgres: emits recorded once, activity
// chunks in order with their attempt, the retry marker of a new attempt, the
// typed refusals, the fence, the end event, retention.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, emit, sleep, StreamLimitError, workflow, MAX_STREAM_ITEM_BYTES } from "../../src/index.ts";
import { summarize, summaryToken } from "../../functions/workflows/summarize.ts";
import { engineOf } from "../../src/edda.ts";
import type { Engine } from "../../src/engine/engine.ts";
import type { StreamEvent } from "../../src/engine/stream-reader.ts";
import type { Database } from "../../src/storage/database.ts";
import { fromJson } from "../../src/core/serialization.ts";
import { queryRows } from "../../src/storage/database.ts";
import { sql } from "drizzle-orm";
import { makeTestApp, openTestDatabase, type DriverKind, type TestApp } from "../support/engine.ts";

let flaky = 0;
const flakyStream = activity(
  "flaky_stream",
  async (ctx) => {
    for (let i = 0; i < 3; i++) ctx.stream.write({ attempt: ctx.attempt, i });
    await ctx.stream.close();
    if (ctx.attempt === 1 && flaky++ >= 0) throw new Error("model hung up");
    return ctx.attempt;
  },
  { transactional: false, retry: { initialIntervalSeconds: 0.05, maxAttempts: 3 } },
);
const retrying = workflow("stream_retry", {}, async (ctx) => flakyStream(ctx));

const emitter = workflow("stream_emits", {}, async (ctx) => {
  await emit(ctx, { step: 1 }, { topic: "progress" });
  await sleep(ctx, 0);
  await emit(ctx, new Uint8Array([0, 255, 1]));
  await emit(ctx, "\ud800 lone", { topic: "progress" });
  return "ok";
});

const tooBig = activity(
  "too_big",
  async (ctx) => {
    try {
      ctx.stream.write("x".repeat(MAX_STREAM_ITEM_BYTES + 1));
    } catch (err) {
      return { refused: (err as StreamLimitError).reason, name: (err as Error).name };
    }
    return { refused: null };
  },
  { transactional: false },
);
const emitTooBig = workflow("stream_emit_too_big", {}, async (ctx) => {
  const r = await tooBig(ctx);
  try {
    await emit(ctx, "y".repeat(MAX_STREAM_ITEM_BYTES + 1));
  } catch (err) {
    return { ...r, emit: (err as StreamLimitError).reason };
  }
  return { ...r, emit: null };
});

const flood = activity(
  "flood",
  async (ctx) => {
    for (let i = 0; i < 400; i++) {
      ctx.stream.write("z".repeat(1000));
      await new Promise((r) => setTimeout(r, 0));
    }
    return "unreachable";
  },
  { transactional: false, retry: { maxAttempts: 1 } },
);
const flooding = workflow("stream_flood", {}, async (ctx) => flood(ctx));

// Continue-as-new: each run streams from the same activity id, emits after it (folded into the
// activity's conclusion by the look-ahead), then emits again in a fresh step right before recurring.
const runChunks = activity(
  "run_chunks",
  async (ctx, n: number) => {
    ctx.stream.write(`chunk ${n}`);
    await ctx.stream.close();
    return n;
  },
  { transactional: false },
);
const recurring = workflow("stream_recur", async (ctx, n: number) => {
  await runChunks(ctx, n);
  await emit(ctx, `after ${n}`);
  await sleep(ctx, 0);
  await emit(ctx, `recur ${n}`, { topic: "runs" });
  if (n < 3) return ctx.recur(n + 1);
  return n;
});

const WORKFLOWS = [summarize, retrying, emitter, emitTooBig, flooding, recurring];

async function collect(engine: Engine, id: string, after = 0, topics?: string[]): Promise<StreamEvent[]> {
  const events = await engine.openStream(id, { after, ...(topics ? { topics } : {}) });
  if (!events) throw new Error(`no stream for ${id}`);
  const out: StreamEvent[] = [];
  for await (const ev of events) if (ev.type !== "heartbeat") out.push(ev);
  return out;
}

const json = (ev: StreamEvent) => (ev.type === "item" && ev.item.data.type === "json" ? fromJson(ev.item.data.json) : undefined);

describe.each<DriverKind>(["pglite", "postgres-js"])("streams on %s", (kind) => {
  let database: Database;
  let t: TestApp;
  let engine: Engine;
  beforeAll(async () => {
    database = await openTestDatabase(kind, "streams");
    t = makeTestApp(database, { workflows: WORKFLOWS, streams: { maxBytes: 50_000 } });
    engine = await engineOf(t.edda);
  }, 120_000);
  afterAll(async () => {
    await t?.edda.close();
    await database?.close();
  });

  it("summarize: every token once and in order, then the workflow's done, then the end status", async () => {
    const { instanceId } = await t.edda.start("summarize", { tokens: 120 });
    const reading = collect(engine, instanceId);
    const events = await reading;
    const items = events.filter((e) => e.type === "item");
    expect(items).toHaveLength(121);
    const seqs = items.map((e) => (e.type === "item" ? e.item.seq : 0));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(items.slice(0, 120).map(json)).toEqual(Array.from({ length: 120 }, (_, i) => summaryToken(i)));
    expect(items.slice(0, 120).every((e) => e.type === "item" && e.item.kind === "chunk" && e.item.attempt === 1 && e.item.topic === "tokens")).toBe(true);
    expect(items[120]).toMatchObject({ item: { kind: "emit", topic: "status" } });
    expect(json(items[120]!)).toBe("done");
    expect(events.at(-1)).toEqual({ type: "end", status: "completed", lastSeq: seqs.at(-1) });
    // Batched: far fewer appends than tokens (FLUSH_MS / FLUSH_BYTES).
    const appends = new Set(items.map((e) => (e.type === "item" ? e.item.createdAt.getTime() : 0))).size;
    expect(appends).toBeLessThan(40);
  });

  it("emits are written once across replays, JSON or bytes, a lone surrogate intact; a topic filter keeps its topic", async () => {
    const { instanceId } = await t.edda.start("stream_emits", {});
    await t.waitFor(instanceId);
    const events = await collect(engine, instanceId);
    const items = events.filter((e) => e.type === "item");
    expect(items.map((e) => e.type === "item" && e.item.source)).toEqual(["emit:1", "emit:2", "emit:3"]);
    expect(json(items[0]!)).toEqual({ step: 1 });
    expect(items[1]).toMatchObject({ item: { data: { type: "binary", bytes: new Uint8Array([0, 255, 1]) } } });
    expect(json(items[2]!)).toBe("\ud800 lone");
    const progress = await collect(engine, instanceId, 0, ["progress"]);
    expect(progress.filter((e) => e.type === "item").map((e) => e.type === "item" && e.item.source)).toEqual(["emit:1", "emit:3"]);
    // Resuming after the first item: the rest, nothing twice.
    const first = items[0]!.type === "item" ? items[0]!.item.seq : 0;
    const rest = await collect(engine, instanceId, first);
    expect(rest.filter((e) => e.type === "item").map((e) => e.type === "item" && e.item.source)).toEqual(["emit:2", "emit:3"]);
    // The end event names the stream's last item, not the reader's cursor (regression: a reader that resumed
    // beyond the end, or read one topic, was told its own cursor back).
    const last = items.at(-1)!.type === "item" ? (items.at(-1) as { item: { seq: number } }).item.seq : 0;
    expect(rest.at(-1)).toEqual({ type: "end", status: "completed", lastSeq: last });
    expect(progress.at(-1)).toEqual({ type: "end", status: "completed", lastSeq: last });
    expect(await collect(engine, instanceId, last + 1000)).toEqual([{ type: "end", status: "completed", lastSeq: last }]);
  });

  it("a stream spans the runs of ctx.recur: an emit just before recur is kept, and a new run's activity is no retry", async () => {
    const { instanceId } = await t.edda.start("stream_recur", 1);
    const done = await t.waitFor(instanceId);
    expect(done).toMatchObject({ status: "completed", output: 3 });
    const events = await collect(engine, instanceId);
    const items = events.flatMap((e) => (e.type === "item" ? [e.item] : []));
    expect(items.map((i) => (i.data.type === "json" ? fromJson(i.data.json) : null))).toEqual(
      [1, 2, 3].flatMap((n) => [`chunk ${n}`, `after ${n}`, `recur ${n}`]),
    );
    expect(items.map((i) => [i.kind, i.run, i.attempt])).toEqual([1, 2, 3].flatMap((n) => [["chunk", n, 1], ["emit", n, 1], ["emit", n, 1]]));
    // One sequence for the instance, whatever the run.
    expect(items.map((i) => i.seq)).toEqual(items.map((_, i) => items[0]!.seq + i));
    expect(events.at(-1)).toEqual({ type: "end", status: "completed", lastSeq: items.at(-1)!.seq });
  });

  it("an attempt that fails after streaming: its chunks stay, a retry marker, then the next attempt's chunks", async () => {
    const { instanceId } = await t.edda.start("stream_retry", {});
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("completed");
    const events = await collect(engine, instanceId);
    const items = events.flatMap((e) => (e.type === "item" ? [e.item] : []));
    expect(items.map((i) => [i.kind, i.attempt])).toEqual([
      ["chunk", 1],
      ["chunk", 1],
      ["chunk", 1],
      ["retry", 2],
      ["chunk", 2],
      ["chunk", 2],
      ["chunk", 2],
    ]);
    expect(items[3]!.data.type === "json" && JSON.parse(items[3]!.data.json)).toEqual({ activityId: "flaky_stream:1", attempt: 2 });
  });

  it("typed refusals: an item over the limit (activity and emit), a stream past its budget fails the attempt", async () => {
    const a = await t.edda.start("stream_emit_too_big", {});
    expect((await t.waitFor(a.instanceId)).output).toEqual({ refused: "chunk_too_large", name: "StreamLimitError", emit: "chunk_too_large" });
    const b = await t.edda.start("stream_flood", {});
    const flooded = await t.waitFor(b.instanceId);
    expect(flooded.status).toBe("failed");
    expect(JSON.stringify(flooded.error)).toContain("StreamLimitError");
    const items = (await collect(engine, b.instanceId)).filter((e) => e.type === "item");
    // Nothing past the budget was stored.
    expect(items.length).toBeLessThanOrEqual(50);
    expect(items.length).toBeGreaterThan(0);
    // Valid traffic still flows.
    const c = await t.edda.start("summarize", { tokens: 5 });
    expect((await t.waitFor(c.instanceId)).status).toBe("completed");
  });

  it("a writer whose lease is gone appends nothing", async () => {
    const { instanceId } = await t.edda.start("summarize", { tokens: 1 });
    await t.waitFor(instanceId);
    const r = await engine.storage.appendStream({
      fence: { instanceId, workerId: "zombie", token: 1 },
      run: 1,
      attempt: 1,
      items: [{ kind: "chunk", source: "x:1", topic: null, data: { type: "json", json: "1" }, size: 1 }],
      maxBytes: 1000,
    });
    expect(r).toEqual({ ok: false, reason: "lease_lost" });
    expect((await engine.storage.readStream(instanceId, 0, { limit: 10 })).items).toHaveLength(2);
  });

  it("an unknown instance has no stream; a purged instance takes its stream with it", async () => {
    expect(await engine.openStream("no-such-instance", { after: 0 })).toBeNull();
    const { instanceId } = await t.edda.start("summarize", { tokens: 3 });
    await t.waitFor(instanceId);
    expect(await engine.storage.purgeFinishedInstances(0, 100, { onlyInstanceId: instanceId })).toEqual([instanceId]);
    expect(await engine.storage.readStream(instanceId, 0, { limit: 10 })).toEqual({ items: [], status: null, lastSeq: 0 });
    const left = await queryRows<{ n: number }>(database.db, sql`SELECT count(*)::int AS n FROM workflow_stream_chunks WHERE instance_id = ${instanceId}`);
    expect(left[0]!.n).toBe(0);
  });
});
