/**
 * What tracing costs: the `local` scenario (concurrent 10-step `pipeline`
 * runs, local dispatcher, postgres.js) with
 *
 *   off        `tracing` unset: no Tracing object, no hooks, no stored context
 *   no-sdk     `tracing: otel` but no SDK registered: the API's no-op tracer
 *              (the case an app that ships tracing but has not set up an
 *              exporter pays)
 *   in-memory  `tracing: otel` with the SDK's BasicTracerProvider, a
 *              SimpleSpanProcessor and an InMemorySpanExporter (spans are
 *              built and kept; no network export)
 *
 * in rounds that alternate the variants (off, no-sdk, in-memory, off, …), so
 * a noisy machine's drift hits each alike; each figure is the median over
 * rounds. Steps/s and this process's CPU per step, as `npm run bench` reports
 * them. Then, without a database, the tracing layer alone: CPU per step of
 * the `edda.step` wrapper plus one activity attempt's hooks, over many
 * iterations (what a step pays on top of its own work). Benchmark, not
 * test: nothing asserts.
 *
 *   npx tsx bench/tracing-cost.ts [--quick]      (throwaway Postgres cluster, or DATABASE_URL)
 */
import * as otel from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Tracing } from "../src/engine/tracing.ts";
import { openBenchPostgres } from "./lib/postgres.ts";
import { median } from "./lib/stats.ts";
import { runEngineLocal, type EngineLocalResult } from "./scenarios/engine-local.ts";

const quick = process.argv.includes("--quick");
const ROUNDS = quick ? 1 : 3;
const opts = { workflows: quick ? 50 : 200, steps: 10, rounds: quick ? 1 : 2, pool: 10, concurrency: 10 };

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let spans = 0;

const variants = {
  off: { setup: () => otel.trace.disable(), tracing: undefined },
  "no-sdk": { setup: () => otel.trace.disable(), tracing: otel },
  "in-memory": { setup: () => otel.trace.setGlobalTracerProvider(provider), tracing: otel },
} as const;
type Variant = keyof typeof variants;

const pg = await openBenchPostgres();
const results: Record<Variant, EngineLocalResult[]> = { off: [], "no-sdk": [], "in-memory": [] };
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, v] of Object.entries(variants) as [Variant, (typeof variants)[Variant]][]) {
      v.setup();
      exporter.reset();
      const res = await runEngineLocal(pg, { ...opts, name: `bench_tracing_${name.replace("-", "_")}_${r}`, ...(v.tracing ? { tracing: v.tracing } : {}) });
      if (name === "in-memory") spans = Math.max(spans, exporter.getFinishedSpans().length);
      results[name].push(res);
      console.log(`round ${r + 1} ${name}: ${res.steps_per_s.toFixed(0)} steps/s, ${res.node_cpu_ms_per_step.toFixed(3)} ms CPU/step`);
    }
  }
} finally {
  otel.trace.disable();
  await pg.stop();
}

const base = median(results.off.map((x) => x.node_cpu_ms_per_step))!;
console.log(`\ntracing cost (Node ${process.version}; ${opts.workflows} × ${opts.steps}-step pipelines × ${opts.rounds} rounds per run, median of ${ROUNDS} runs)`);
console.log("| variant | steps/s | CPU ms/step (engine process) | vs off | statements/step |");
console.log("|---|---|---|---|---|");
for (const [name, rs] of Object.entries(results)) {
  const cpu = median(rs.map((x) => x.node_cpu_ms_per_step))!;
  console.log(`| ${name} | ${median(rs.map((x) => x.steps_per_s))!.toFixed(0)} | ${cpu.toFixed(3)} | ${name === "off" ? "—" : `${cpu >= base ? "+" : ""}${(((cpu - base) / base) * 100).toFixed(0)} %`} | ${median(rs.map((x) => x.statements_per_step))!.toFixed(2)} |`);
}
console.log(`(in-memory: ${spans} spans kept in the last run)`);

/** CPU µs per step of the tracing layer alone: the step wrapper, one attempt's start/complete hooks. */
async function layerMicros(sdk: boolean): Promise<number> {
  if (sdk) otel.trace.setGlobalTracerProvider(provider);
  else otel.trace.disable();
  const tracing = new Tracing(otel);
  const N = quick ? 20_000 : 100_000;
  const run = async (i: number) => {
    const info = { instanceId: `i${i % 100}`, workflowName: "wf", activityId: "a:1", activityName: "a", attempt: 1 };
    await tracing.step({ instanceId: info.instanceId }, async () => null, async () => {
      tracing.hooks.onActivityStart!(info);
      tracing.hooks.onActivityComplete!({ ...info, result: null });
      return { status: "concluded", instanceStatus: "running" };
    });
  };
  for (let i = 0; i < N / 10; i++) await run(i); // warm-up
  exporter.reset();
  const t0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    await run(i);
    if (sdk && i % 10_000 === 0) exporter.reset();
  }
  const d = process.cpuUsage(t0);
  otel.trace.disable();
  return (d.user + d.system) / N;
}
const noSdk = await layerMicros(false);
const withSdk = await layerMicros(true);
console.log(`tracing layer alone (no database): no SDK ${noSdk.toFixed(2)} µs CPU per step, in-memory SDK ${withSdk.toFixed(2)} µs`);
