/**
 * What metrics cost: the `local` scenario (concurrent 10-step `pipeline`
 * runs, local dispatcher, postgres.js) with
 *
 *   off        `metrics` unset: no Metrics object, no hooks, no timing
 *   no-sdk     `metrics: otel` but no MeterProvider registered: the API's
 *              no-op meter (an app that ships metrics but has not set up an
 *              SDK)
 *   in-memory  `metrics: otel` with the SDK's MeterProvider and an in-memory
 *              exporter (data points aggregated; nothing exported during the run)
 *
 * in rounds that alternate the variants (off, no-sdk, in-memory, off, …);
 * each figure is the median over rounds. Then, without a database, the
 * metrics layer alone: CPU per step of what a step pays on top of its own
 * work (the step's count and duration, a start and its hook), over many
 * iterations. Benchmark, not test: nothing asserts.
 *
 *   npx tsx bench/metrics-cost.ts [--quick]      (throwaway Postgres cluster, or DATABASE_URL)
 */
import * as otel from "@opentelemetry/api";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { Metrics, type MetricsApi } from "../src/engine/metrics.ts";
import { openBenchPostgres } from "./lib/postgres.ts";
import { median } from "./lib/stats.ts";
import { runEngineLocal, type EngineLocalResult } from "./scenarios/engine-local.ts";

const quick = process.argv.includes("--quick");
const ROUNDS = quick ? 1 : 3;
const opts = { workflows: quick ? 50 : 200, steps: 10, rounds: quick ? 1 : 2, pool: 10, concurrency: 10 };

const reader = new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 3_600_000 });
const provider = new MeterProvider({ readers: [reader] });
// No global provider is ever registered here: `otel` stays the no-op API. metrics.ts keeps one Metrics per API object.
const noSdkApi: MetricsApi = otel;
const sdkApi: MetricsApi = { metrics: provider };

const variants = { off: undefined, "no-sdk": noSdkApi, "in-memory": sdkApi } as const;
type Variant = keyof typeof variants;

const pg = await openBenchPostgres();
const results: Record<Variant, EngineLocalResult[]> = { off: [], "no-sdk": [], "in-memory": [] };
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, api] of Object.entries(variants) as [Variant, (typeof variants)[Variant]][]) {
      const res = await runEngineLocal(pg, { ...opts, name: `bench_metrics_${name.replace("-", "_")}_${r}`, ...(api ? { metrics: api } : {}) });
      results[name].push(res);
      console.log(`round ${r + 1} ${name}: ${res.steps_per_s.toFixed(0)} steps/s, ${res.node_cpu_ms_per_step.toFixed(3)} ms CPU/step`);
    }
  }
} finally {
  await pg.stop();
}

const base = median(results.off.map((x) => x.node_cpu_ms_per_step))!;
console.log(`\nmetrics cost (Node ${process.version}; ${opts.workflows} × ${opts.steps}-step pipelines × ${opts.rounds} rounds per run, median of ${ROUNDS} runs)`);
console.log("| variant | steps/s | CPU ms/step (engine process) | vs off | statements/step |");
console.log("|---|---|---|---|---|");
for (const [name, rs] of Object.entries(results)) {
  const cpu = median(rs.map((x) => x.node_cpu_ms_per_step))!;
  console.log(`| ${name} | ${median(rs.map((x) => x.steps_per_s))!.toFixed(0)} | ${cpu.toFixed(3)} | ${name === "off" ? "—" : `${cpu >= base ? "+" : ""}${(((cpu - base) / base) * 100).toFixed(0)} %`} | ${median(rs.map((x) => x.statements_per_step))!.toFixed(2)} |`);
}

/** CPU µs per step of the metrics layer alone: a step's count and duration, plus one start hook per 10 steps. */
function layerMicros(api: MetricsApi): number {
  const m = new Metrics(api);
  const N = quick ? 50_000 : 500_000;
  const run = (i: number) => {
    const t0 = performance.now();
    m.step("pipeline", i % 10 === 9 ? "completed" : "running", (performance.now() - t0) / 1000);
    if (i % 10 === 0) m.hooks.onWorkflowStart!({ instanceId: "i", workflowName: "pipeline", input: null });
  };
  for (let i = 0; i < N / 10; i++) run(i); // warm-up
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) run(i);
  const d = process.cpuUsage(c0);
  return (d.user + d.system) / N;
}
console.log(`metrics layer alone (no database): no SDK ${layerMicros(noSdkApi).toFixed(3)} µs CPU per step, in-memory SDK ${layerMicros(sdkApi).toFixed(3)} µs`);
await provider.shutdown();
