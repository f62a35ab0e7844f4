/**
 * Realtime streams on Node over loopback: how long an item takes from
 * `ctx.stream.write` (or `emit`) in the engine to a reader of
 * `GET /instances/:id/stream` over HTTP, and what a chunk costs in
 * statements. One process runs the app (postgres.js, local dispatcher,
 * `@hono/node-server` on 127.0.0.1) and the readers (fetch), so both ends
 * read one clock: each item carries `performance.now()` at its write.
 *
 *   sparse   one write every 100 ms (progress): each goes out at once
 *   tokens   one write every 2 ms (a model's tokens): batched, ≤ one append per 50 ms
 *   emits    the workflow emits between activities
 *
 * Statements per chunk: the appends the chunks took (rows of one append share
 * its transaction's `created_at`) over the chunks. Benchmark, not test.
 *
 *   npx tsx bench/stream-latency.ts [--quick]    (throwaway Postgres cluster, or DATABASE_URL)
 */
import { serve } from "@hono/node-server";
import os from "node:os";
import { sql } from "drizzle-orm";
import { activity, createEdda, emit, workflow } from "../src/index.ts";
import { LocalDispatcher } from "../src/engine/dispatcher.ts";
import { queryRows } from "../src/storage/database.ts";
import { createPostgresJsDatabase } from "../src/storage/drivers/postgres-js.ts";
import { migrate } from "../src/storage/migrate.ts";
import { openBenchPostgres } from "./lib/postgres.ts";
import { percentile, round } from "./lib/stats.ts";
import { sseEvents } from "../test/support/sse.ts";

const quick = process.argv.includes("--quick");

const speak = activity(
  "bench_speak",
  async (ctx, o: { n: number; everyMs: number }) => {
    for (let i = 0; i < o.n; i++) {
      ctx.stream.write({ t: performance.now() });
      await new Promise((r) => setTimeout(r, o.everyMs));
    }
    return o.n;
  },
  { transactional: false },
);
const stamp = activity("bench_stamp", () => performance.now());
const speaking = workflow("bench_speaking", async (ctx, o: { n: number; everyMs: number }) => speak(ctx, o));
const emitting = workflow("bench_emitting", async (ctx, n: number) => {
  for (let i = 0; i < n; i++) {
    await stamp(ctx);
    await emit(ctx, { t: performance.now() });
  }
  return n;
});

const pg = await openBenchPostgres();
const url = await pg.createDatabase("bench_streams");
const database = createPostgresJsDatabase({ url, max: 10 });
await migrate(database.db);
const edda = createEdda({ database, dispatcher: new LocalDispatcher({ concurrency: 8 }), workflows: [speaking, emitting], secret: "bench" });
const server = serve({ fetch: edda.app.fetch, hostname: "127.0.0.1", port: 0 });
await new Promise<void>((r) => server.once("listening", () => r()));
const port = (server.address() as { port: number }).port;

/** Start `name`, attach `readers` SSE readers, and collect each item's write→read latency (ms). */
async function run(name: string, input: unknown, readers: number, kind: "chunk" | "emit"): Promise<{ latencies: number[]; items: number; appends: number; id: string }> {
  const { instanceId } = await edda.start(name, input);
  const latencies: number[] = [];
  let items = 0;
  await Promise.all(
    Array.from({ length: readers }, async () => {
      const res = await fetch(`http://127.0.0.1:${port}/instances/${instanceId}/stream`);
      for await (const ev of sseEvents(res.body!)) {
        if (ev.event === "end") break;
        if (ev.event !== kind) continue;
        const now = performance.now();
        latencies.push(now - (JSON.parse(ev.data) as { data: { t: number } }).data.t);
        items++;
      }
    }),
  );
  const rows = await queryRows<{ appends: number }>(database.db, sql`SELECT count(DISTINCT created_at)::int AS appends FROM workflow_stream_chunks WHERE instance_id = ${instanceId} AND kind = ${kind}`);
  return { latencies, items: items / readers, appends: rows[0]!.appends, id: instanceId };
}

const scenarios = [
  { what: "sparse: 1 write / 100 ms, 1 reader", name: "bench_speaking", input: { n: quick ? 20 : 60, everyMs: 100 }, readers: 1, kind: "chunk" as const },
  { what: "tokens: 1 write / 2 ms, 1 reader", name: "bench_speaking", input: { n: quick ? 300 : 1000, everyMs: 2 }, readers: 1, kind: "chunk" as const },
  { what: "tokens: 1 write / 2 ms, 50 readers", name: "bench_speaking", input: { n: quick ? 300 : 1000, everyMs: 2 }, readers: 50, kind: "chunk" as const },
  { what: "emits between activities, 1 reader", name: "bench_emitting", input: quick ? 20 : 60, readers: 1, kind: "emit" as const },
];

// Warm-up: connections, prepared statements, the shared LISTEN.
await run("bench_speaking", { n: 20, everyMs: 5 }, 1, "chunk");

const load = os.loadavg().map((l) => l.toFixed(1)).join(" ");
console.log(`realtime streams over loopback (postgres.js, ${pg.throwaway ? "throwaway cluster" : "DATABASE_URL"}), load average ${load}`);
console.log("| pattern | items | p50 ms | p99 ms | appends | statements/item |");
console.log("|---|---|---|---|---|---|");
for (const s of scenarios) {
  const r = await run(s.name, s.input, s.readers, s.kind);
  const p50 = round(percentile(r.latencies, 50), 1);
  const p99 = round(percentile(r.latencies, 99), 1);
  console.log(`| ${s.what} | ${r.items} | ${p50} | ${p99} | ${r.appends} | ${round(r.appends / r.items, 3)} |`);
}
console.log(`load average after: ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`);

server.close();
await edda.close();
await database.close();
await pg.stop();
