/**
 * `npx tsx bench/lean-report.ts BEFORE.json AFTER.json [NOW.json]`
 *
 * Writes the "Lean steps" section of BENCHMARKS.md (between its `lean:begin`
 * / `lean:end` markers) from `npm run bench -- --quick` results
 * (bench/results/latest.json of each run): before and after the step's
 * transaction lost its envelope, and optionally a later run (the leaner
 * step: shaped lease statements, the start's lease handed to the first step,
 * replay waves without an event-loop turn), and keeps them under
 * docs/benchmarks/. Nothing in the table is typed by hand.
 */
import { copyFileSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeGeneratedSection } from "./lib/generated-section.ts";

interface Run {
  [key: string]: unknown;
  meta: { started_at: string; commit: string | null; machine: { loadavg_start: number[]; loadavg_end: number[] } };
}

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const [beforePath, afterPath, nowPath] = process.argv.slice(2);
if (!beforePath || !afterPath) throw new Error("usage: npx tsx bench/lean-report.ts BEFORE.json AFTER.json [NOW.json]");
const read = (p: string) => JSON.parse(readFileSync(p, "utf8")) as Run;
const runs: Run[] = [read(beforePath), read(afterPath), ...(nowPath ? [read(nowPath)] : [])];
const [before, after] = runs as [Run, Run];

/** Figures derived from others, for runs made before the scenario reported them. */
const DERIVED: Record<string, (r: Run) => number | null> = {
  replay_cold_us_per_entry: (r) => {
    const lo = r.replay_cold_ms_h10;
    const hi = r.replay_cold_ms_h1000;
    return typeof lo === "number" && typeof hi === "number" ? ((hi - lo) / 990) * 1000 : null;
  },
};
const num = (r: Run, key: string): number | null => (typeof r[key] === "number" ? (r[key] as number) : (DERIVED[key]?.(r) ?? null));
const fmt = (x: number | null) => (x === null ? "—" : x >= 100 ? Math.round(x).toLocaleString("en-US") : x.toFixed(2));
const ratio = (r: Run, a: string, b: string) => {
  const x = num(r, a);
  const y = num(r, b);
  return x !== null && y ? x / y : null;
};

const ROWS: [string, string][] = [
  ["local: steps/s (200 × 10-step `pipeline`, fsync off)", "local_steps_per_s"],
  ["local, `transactional: false` activities: steps/s", "local_nontx_steps_per_s"],
  ["statements / commits per step (local)", "statements_per_step"],
  ["CPU per step: engine process, ms", "node_cpu_ms_per_step"],
  ["CPU per step: Postgres backends, ms", "pg_cpu_ms_per_step"],
  ["cold step: cost per history entry (slope of 10 → 1,000 entries), µs", "replay_cold_us_per_entry"],
  ["– of it the engine process's CPU, µs", "replay_cold_cpu_us_per_entry"],
  ["cold step with 10 / 1,000 history entries, ms", "replay_cold_ms_h10"],
  ["10 ms RTT: round trips per cold step", "latency_cold_round_trips_per_step"],
  ["10 ms RTT: cold step, ms", "latency_cold_step_ms"],
  ["10 ms RTT: round trips per warm step", "latency_warm_round_trips_per_step"],
  ["10 ms RTT: warm step, ms", "latency_warm_step_ms"],
  ["10 ms RTT: 100 × 10-step pipelines, steps/s", "latency_local_steps_per_s"],
  ["10 ms RTT: step p50, ms", "latency_local_step_p50_ms"],
  ["client per step (Workers), trust: round trips", "latency_fresh_round_trips_per_step"],
  ["client per step (Workers), SCRAM: round trips", "latency_fresh_scram_round_trips_per_step"],
  ["durable, loopback: Edda steps/s", "peers_local_steps_per_s"],
  ["durable, loopback: Absurd steps/s", "peers_absurd_steps_per_s"],
  ["durable, loopback: DBOS steps/s", "peers_dbos_steps_per_s"],
  ["durable, 10 ms RTT: Edda steps/s", "peers_rtt_local_steps_per_s"],
  ["durable, 10 ms RTT: Absurd steps/s", "peers_rtt_absurd_steps_per_s"],
  ["durable, 10 ms RTT: DBOS steps/s", "peers_rtt_dbos_steps_per_s"],
  ["durable, 10 ms RTT: Edda round trips per step, all concurrent", "peers_rtt_local_round_trips_per_step"],
  ["durable, 10 ms RTT: Edda cold / warm step round trips", "peers_rtt_local_cold_round_trips_per_step"],
  ["durable, 10 ms RTT: Edda step p50, ms", "peers_rtt_local_step_p50_ms"],
  ["durable, 10 ms RTT, one `transactional: false` pipeline alone: round trips per step, its start included", "peers_rtt_local_nontx_alone_round_trips_per_step"],
  ["– the same, its start counted apart: start / per step", "peers_rtt_local_nontx_alone_start_round_trips"],
];
const PAIRS: Record<string, string> = {
  statements_per_step: "commits_per_step",
  peers_rtt_local_cold_round_trips_per_step: "peers_rtt_local_warm_round_trips_per_step",
  replay_cold_ms_h10: "replay_cold_ms_h1000",
  peers_rtt_local_nontx_alone_start_round_trips: "peers_rtt_local_nontx_alone_step_round_trips_per_step",
};
const RATIOS: [string, string, string][] = [
  ["durable, loopback: Edda ÷ Absurd", "peers_local_steps_per_s", "peers_absurd_steps_per_s"],
  ["durable, loopback: Edda ÷ DBOS", "peers_local_steps_per_s", "peers_dbos_steps_per_s"],
  ["durable, 10 ms RTT: Edda ÷ Absurd", "peers_rtt_local_steps_per_s", "peers_rtt_absurd_steps_per_s"],
  ["durable, 10 ms RTT: Edda ÷ DBOS", "peers_rtt_local_steps_per_s", "peers_rtt_dbos_steps_per_s"],
];

const cell = (r: Run, key: string) => (PAIRS[key] ? `${fmt(num(r, key))} / ${fmt(num(r, PAIRS[key]))}` : fmt(num(r, key)));
const runOf = (r: Run) =>
  `commit \`${r.meta.commit ?? "?"}\`, ${r.meta.started_at.slice(0, 16).replace("T", " ")} UTC, load ${r.meta.machine.loadavg_start.map((l) => l.toFixed(1)).join("/")} → ${r.meta.machine.loadavg_end.map((l) => l.toFixed(1)).join("/")}`;

const now = runs[2];
const files = ["docs/benchmarks/lean-before.json", "docs/benchmarks/lean-after.json", ...(now ? ["docs/benchmarks/lean-now.json"] : [])];
const body = `${runs.length === 2 ? "Two" : "Three"} quick runs (\`npm run bench -- --quick\`, one pass each) on the shared 2-core machine: before (${runOf(before)}), after (${runOf(after)})${now ? ` and now (${runOf(now)})` : ""}. \`npx tsx bench/lean-report.ts ${files.join(" ")}\` writes this table. Round trips are exact counts of the latency proxy; throughput and latency carry the load of the machine, so compare the ratios between peers of one run.

| figure | before | after${now ? " | now" : ""} |
| --- | ---: | ---:${now ? " | ---:" : ""} |
${ROWS.map(([label, key]) => `| ${label} | ${runs.map((r) => cell(r, key)).join(" | ")} |`).join("\n")}
${RATIOS.map(([label, a, b]) => `| ${label} | ${runs.map((r) => `${fmt(ratio(r, a, b))}×`).join(" | ")} |`).join("\n")}`;

// The issue's replay target, against the last run (the other targets are checked in the peers table).
const last = runs[runs.length - 1]!;
const perEntry = num(last, "replay_cold_us_per_entry");
const perEntryCpu = num(last, "replay_cold_cpu_us_per_entry");
const verdict = (v: number | null) => (v === null ? "not measured" : v <= 10 ? "**met**" : "missed");
const targets = `

Target, last run (load ${last.meta.machine.loadavg_start.map((l) => l.toFixed(1)).join("/")}): cold replay ≤ 10 µs per history entry — the cold step's latency grows by ${fmt(perEntry)} µs per entry (${verdict(perEntry)}), the engine process's CPU by ${fmt(perEntryCpu)} µs (${verdict(perEntryCpu)}); the rest of the latency is the database's side (the history's JSON) and waiting for a core.`;

const BEGIN = "<!-- lean:begin (bench/lean-report.ts writes this section) -->";
const END = "<!-- lean:end -->";
const path = join(root, "BENCHMARKS.md");
writeGeneratedSection(path, BEGIN, END, body + targets);
const keep = (from: string, name: string) => {
  const to = join(root, "docs", "benchmarks", name);
  if (from !== to) copyFileSync(from, to);
};
keep(beforePath, "lean-before.json");
keep(afterPath, "lean-after.json");
if (nowPath) keep(nowPath, "lean-now.json");
console.log("wrote the lean-steps table of BENCHMARKS.md");
