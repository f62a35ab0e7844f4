/**
 * `npx tsx bench/per-request-report.ts [results.json]`
 *
 * Writes BENCHMARKS.md's per-request table (issue 36) from a bench run's
 * results (default bench/results/latest.json, from
 * `npm run bench -- --quick --only=local,http,queue,replay`): the http and
 * queue paths beside the local dispatcher of the same run, CPU per step, and
 * the cold replay's CPU per history entry, with the targets met or missed.
 * A run of the replay scenario alone (`--only=replay`) rewrites only the cold
 * replay's part (its own markers inside the section, with its own run line).
 * Nothing here is typed by hand.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeGeneratedSection } from "./lib/generated-section.ts";

type Doc = Record<string, unknown> & { meta: { started_at: string; commit: string | null; machine: { loadavg_start: number[]; loadavg_end: number[] }; config: { mode: string } }; targets: { name: string; met: boolean | null; detail: string }[] };

const root = join(import.meta.dirname, "..");
const path = process.argv[2] ?? join(root, "bench", "results", "latest.json");
const d = JSON.parse(readFileSync(path, "utf8")) as Doc;
const num = (k: string) => (typeof d[k] === "number" ? (d[k] as number) : null);
const f = (v: number | null, digits = 2) => (v === null ? "—" : Math.abs(v) >= 100 ? Math.round(v).toLocaleString("en-US") : v.toFixed(digits));
const ratio = (a: number | null, b: number | null) => (a !== null && b ? f(a / b) : "—");
const local = num("local_steps_per_s");
const rows = [
  `| Engine, local dispatcher (one process, follow-ups in memory) | ${f(local)} steps/s | ${f(num("statements_per_step"))} | ${f(num("node_cpu_ms_per_step"))} ms | 1 |`,
  `| Engine, http dispatcher (2 Node servers, follow-ups as signed POSTs) | ${f(num("http_steps_per_s"))} steps/s | ${f(num("http_statements_per_step"))} | ${f(num("http_cpu_ms_per_step"))} ms | ${ratio(num("http_steps_per_s"), local)} |`,
  `| Engine behind a queue (Workers adapter, consumer batches, ${f(num("queue_messages_per_batch"), 0)} messages per batch) | ${f(num("queue_steps_per_s"))} steps/s | — | ${f(num("queue_cpu_ms_per_step"))} ms | ${ratio(num("queue_steps_per_s"), local)} |`,
];
/** What the queue path's connects take of it: connections per step × a connect's CPU, beside its CPU per step. */
const connCpu = num("queue_connections_per_step") !== null && num("queue_connect_cpu_ms") !== null ? num("queue_connections_per_step")! * num("queue_connect_cpu_ms")! : null;
const queueNote =
  num("queue_connect_ms") === null
    ? []
    : [
        "",
        `Behind the queue every invocation — each pipeline's start request and each consumer batch — opens its own client (Workers cannot share a socket across invocations): ${f(num("queue_invocations_per_step"), 3)} invocations and ${f(num("queue_connections_per_step"), 3)} connections per step; a consumer invocation ran ${f(num("queue_steps_per_batch"), 0)} steps (its messages and the steps it chained, EDDA_CONSUMER_CPU_MS=30000 as on Paid). A connect with its first statement and close costs ${f(num("queue_connect_ms"))} ms and ${f(num("queue_connect_cpu_ms"))} ms of this process's CPU (measured apart), so connects take about ${f(connCpu, 3)} ms of the ${f(num("queue_cpu_ms_per_step"))} ms of CPU per step.`,
      ];
const sizes = [10, 100, 1000, 5000, 10000];
/** This process's CPU per entry of a cold step between two history sizes, in µs. */
const slope = (lo: number, hi: number) => {
  const [a, b] = [num(`replay_cold_cpu_ms_h${lo}`), num(`replay_cold_cpu_ms_h${hi}`)];
  return a === null || b === null ? null : ((b - a) / (hi - lo)) * 1000;
};
const cold = sizes.map((h) => `| ${h.toLocaleString("en-US")} | ${f(num(`replay_cold_ms_h${h}`))} ms | ${f(num(`replay_cold_cpu_ms_h${h}`))} ms | ${f(num(`replay_ms_h${h}`))} ms |`);
const targetRows = (re: RegExp) => d.targets.filter((t) => re.test(t.name)).map((t) => `| ${t.name} | ${t.met === null ? "n/a" : t.met ? "**met**" : "**missed**"}: ${t.detail} |`);
const { machine, started_at, commit, config } = d.meta;
const run = (only: string) =>
  `a ${config.mode} run (\`npm run bench -- ${config.mode === "quick" ? "--quick " : ""}--only=${only}\`) at \`${commit ?? "?"}\`, ${started_at.slice(0, 16)}Z, load ${machine.loadavg_start.map((l) => l.toFixed(1)).join("/")} → ${machine.loadavg_end.map((l) => l.toFixed(1)).join("/")}`;
const replayOnly = num("local_steps_per_s") === null && num("replay_cold_cpu_us_per_entry") !== null;
const COLD_BEGIN = "<!-- cold-replay:begin -->";
const COLD_END = "<!-- cold-replay:end -->";
const coldBody = [
  ...(replayOnly ? [`Cold replay from ${run("replay")}.`, ""] : []),
  `Cold step (lease, history read, replay) by history size; its CPU slope 10 → 10,000 entries is **${f(num("replay_cold_cpu_us_per_entry"))} µs per entry** (latency slope ${f(num("replay_cold_us_per_entry"))} µs); 10 → 1,000 entries, the span earlier runs measured, **${f(slope(10, 1000))} µs**; 1,000 → 10,000, ${f(slope(1000, 10000))} µs:`,
  "",
  "| History entries | cold step latency | its CPU (this process) | warm step latency |",
  "|---:|---:|---:|---:|",
  ...cold,
  "",
  "| Target (issue 36) | Result |",
  "|---|---|",
  ...targetRows(/replay_cold_cpu/),
].join("\n");
/**
 * README's word on when to recur, from the same figures: the history a cold step replays within the
 * Workers Free plan's 10 ms of CPU per invocation (the smallest budget a platform sets), at this run's
 * cost of a step with 10 entries plus the slope per entry.
 */
const perEntry = num("replay_cold_cpu_us_per_entry");
const base = num("replay_cold_cpu_ms_h10");
const fits = perEntry && base !== null ? Math.floor((((10 - base) * 1000) / perEntry) / 100) * 100 : null;
const recurBody = [
  `Every step on Workers, Deno Deploy and behind a queue replays its history cold: about **${f(perEntry)} µs of CPU per history entry** on top of ${f(base)} ms for the step itself (${f(num("replay_cold_cpu_ms_h1000"))} ms at 1,000 entries, ${f(num("replay_cold_cpu_ms_h5000"))} ms at 5,000; [BENCHMARKS.md](BENCHMARKS.md#the-per-request-paths-issue-36), ${run(replayOnly ? "replay" : "local,http,queue,replay")}).`,
  `So on the Workers Free plan (10 ms of CPU per invocation) a run fits about ${fits === null ? "—" : fits.toLocaleString("en-US")} entries, on paid plans far more (30 s by default); \`why\` and the viewer warn once a run's history reaches 80 % of what fits in the app's budget (the Workers adapter assumes the Free plan's; \`EDDA_CPU_BUDGET_MS\` sets a paid plan's).`,
  "A workflow that loops — a job worker, a poller, a conversation — should `ctx.recur(input)` every few hundred iterations: the run's history is archived and the next run starts empty under the same instance id, keeping its channel subscriptions and groups ([docs/waits.md](docs/waits.md)).",
].join("\n");
writeGeneratedSection(join(root, "README.md"), "<!-- recur-budget:begin -->", "<!-- recur-budget:end -->", recurBody);
/**
 * The same figures for the running app (src/engine/replay-cost.gen.ts): `why` and the viewer estimate a
 * cold step's CPU from an instance's history size with them (engine/history-budget.ts).
 */
if (perEntry !== null && base !== null) {
  const gen = [
    "// Generated by `npx tsx bench/per-request-report.ts` from a bench run's results; do not edit.",
    "/** A cold step's CPU as measured by the replay scenario (bench/scenarios/replay.ts): per history entry (slope 10 → 10,000), and for the step itself (10 entries). */",
    "export const REPLAY_COST = {",
    `  cpuUsPerEntry: ${perEntry},`,
    `  stepCpuMs: ${base},`,
    `  measured: ${JSON.stringify(`${commit ?? "?"} ${started_at.slice(0, 16)}Z, ${config.mode} run`)},`,
    "} as const;",
    "",
  ].join("\n");
  writeFileSync(join(root, "src", "engine", "replay-cost.gen.ts"), gen);
}
const path_ = join(root, "BENCHMARKS.md");
if (replayOnly) {
  writeGeneratedSection(path_, COLD_BEGIN, COLD_END, coldBody);
  console.log(coldBody);
} else {
  const body = [
    `Generated by \`npx tsx bench/per-request-report.ts\` from ${run("local,http,queue,replay")}; 200 concurrent 10-step pipelines, throwaway cluster (fsync off).`,
    "",
    "| Path | steps/s | statements/step | this process's CPU/step | × local |",
    "|---|---:|---:|---:|---:|",
    ...rows,
    ...queueNote,
    "",
    "| Target (issue 36) | Result |",
    "|---|---|",
    ...targetRows(/http_|queue_/),
    "",
    COLD_BEGIN,
    coldBody,
    COLD_END,
  ].join("\n");
  writeGeneratedSection(path_, "<!-- per-request:begin -->", "<!-- per-request:end -->", body);
  console.log(body);
}
