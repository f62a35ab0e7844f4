/**
 * `npx tsx bench/group-commit-report.ts BEFORE.json AFTER.json`
 *
 * Writes the group-commit table of BENCHMARKS.md (between its
 * `group-commit:begin` / `group-commit:end` markers) from two runs of
 * `npm run bench -- --quick --only=local,local-ungrouped,local-nontx,local-unprepared,peers`
 * (local-ungrouped: the same commit with group commit off; the before run has none),
 * each followed by `npx tsx bench/step-cpu.ts --into=bench/results/latest.json`
 * (one step alone, its Node CPU): before the conclusion was built once per
 * shape and grouped, and after. Keeps both runs as
 * docs/benchmarks/group-commit-{before,after}.json. Nothing in the table is
 * typed by hand.
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
const [beforePath, afterPath] = process.argv.slice(2);
if (!beforePath || !afterPath) throw new Error("usage: npx tsx bench/group-commit-report.ts BEFORE.json AFTER.json");
const runs = [beforePath, afterPath].map((p) => JSON.parse(readFileSync(p, "utf8")) as Run);

const num = (r: Run, key: string): number | null => (typeof r[key] === "number" ? (r[key] as number) : null);
const fmt = (x: number | null) => (x === null ? "—" : x >= 100 ? Math.round(x).toLocaleString("en-US") : x.toFixed(2));

const ROWS: [string, string][] = [
  ["local: steps/s (200 × 10-step `pipeline`, fsync off)", "local_steps_per_s"],
  ["local: statements per step", "statements_per_step"],
  ["local: commits per step", "commits_per_step"],
  ["local: CPU per step, engine process, ms", "node_cpu_ms_per_step"],
  ["local: CPU per step, Postgres backends, ms", "pg_cpu_ms_per_step"],
  ["local: step p50, ms", "step_p50_ms"],
  ["local, group commit off (`groupCommit: false`): steps/s", "local_ungrouped_steps_per_s"],
  ["  statements per step", "ungrouped_statements_per_step"],
  ["  CPU per step, engine process / Postgres backends, ms", "ungrouped_node_cpu_ms_per_step"],
  ["local, `transactional: false`: steps/s", "local_nontx_steps_per_s"],
  ["local, `transactional: false`: commits per step", "nontx_commits_per_step"],
  ["local, `prepare: false`: steps/s", "local_unprepared_steps_per_s"],
  ["local, `prepare: false`: CPU per step, Postgres backends, ms", "unprepared_pg_cpu_ms_per_step"],
  ["one step alone (bench/step-cpu.ts), Node CPU median: cold, empty history, ms", "step_cpu_cold0_ms"],
  ["  cold, 100 history entries, ms", "step_cpu_cold100_ms"],
  ["  warm, 100 history entries, ms", "step_cpu_warm100_ms"],
  ["durable, loopback: INSERT ceiling, commits/s", "peers_ceiling_commits_per_s"],
  ["durable, loopback: Edda steps/s", "peers_local_steps_per_s"],
  ["durable, loopback: Edda CPU per step, engine / Postgres, ms", "peers_local_node_cpu_ms_per_step"],
  ["durable, loopback: Absurd steps/s", "peers_absurd_steps_per_s"],
  ["durable, loopback: DBOS steps/s", "peers_dbos_steps_per_s"],
  ["durable, loopback: graphile-worker steps/s", "peers_graphile_steps_per_s"],
  ["durable, 10 ms RTT: Edda steps/s", "peers_rtt_local_steps_per_s"],
  ["durable, 10 ms RTT: Edda round trips per step, all concurrent", "peers_rtt_local_round_trips_per_step"],
  ["durable, 10 ms RTT: Edda step p50, ms", "peers_rtt_local_step_p50_ms"],
  ["durable, 10 ms RTT: Absurd steps/s", "peers_rtt_absurd_steps_per_s"],
  ["durable, 10 ms RTT: DBOS steps/s", "peers_rtt_dbos_steps_per_s"],
];
const PAIRS: Record<string, string> = { peers_local_node_cpu_ms_per_step: "peers_local_pg_cpu_ms_per_step", ungrouped_node_cpu_ms_per_step: "ungrouped_pg_cpu_ms_per_step" };
const RATIOS: [string, string, string][] = [
  ["durable, loopback: Edda ÷ Absurd", "peers_local_steps_per_s", "peers_absurd_steps_per_s"],
  ["durable, loopback: Edda ÷ DBOS", "peers_local_steps_per_s", "peers_dbos_steps_per_s"],
  ["durable, loopback: Edda ÷ INSERT ceiling", "peers_local_steps_per_s", "peers_ceiling_commits_per_s"],
  ["durable, 10 ms RTT: Edda ÷ Absurd", "peers_rtt_local_steps_per_s", "peers_rtt_absurd_steps_per_s"],
  ["durable, 10 ms RTT: Edda ÷ DBOS", "peers_rtt_local_steps_per_s", "peers_rtt_dbos_steps_per_s"],
];

const cell = (r: Run, key: string) => (PAIRS[key] ? `${fmt(num(r, key))} / ${fmt(num(r, PAIRS[key]!))}` : fmt(num(r, key)));
const ratio = (r: Run, a: string, b: string) => {
  const [x, y] = [num(r, a), num(r, b)];
  return x !== null && y ? `${fmt(x / y)}×` : "—";
};
const load = (l: unknown) => (Array.isArray(l) ? (l as number[]).map((x) => x.toFixed(1)).join("/") : "?");
const runOf = (r: Run) =>
  `commit \`${r.meta.commit ?? "?"}\`, ${r.meta.started_at.slice(0, 16).replace("T", " ")} UTC, load ${load(r.meta.machine.loadavg_start)} → ${load(r.meta.machine.loadavg_end)}` +
  (r.step_cpu_loadavg ? `, step-cpu at load ${load(r.step_cpu_loadavg)}` : "");

const [before, after] = runs as [Run, Run];
const shown = ROWS.filter(([, key]) => runs.some((r) => num(r, key) !== null));
const body = `Two quick runs (\`npm run bench -- --quick --only=local,local-ungrouped,local-nontx,local-unprepared,peers\`, one pass each, then \`npx tsx bench/step-cpu.ts --into=bench/results/latest.json\`) on the shared 2-core machine: before (${runOf(before)}) and after (${runOf(after)}). \`npx tsx bench/group-commit-report.ts docs/benchmarks/group-commit-before.json docs/benchmarks/group-commit-after.json\` writes this table. Throughput, latency and CPU carry the machine's load; compare the ratios between peers of one run.

| figure | before | after |
| --- | ---: | ---: |
${shown.map(([label, key]) => `| ${label} | ${cell(before, key)} | ${cell(after, key)} |`).join("\n")}
${RATIOS.map(([label, a, b]) => `| ${label} | ${ratio(before, a, b)} | ${ratio(after, a, b)} |`).join("\n")}`;

const BEGIN = "<!-- group-commit:begin (bench/group-commit-report.ts writes this section) -->";
const END = "<!-- group-commit:end -->";
const path = join(root, "BENCHMARKS.md");
writeGeneratedSection(path, BEGIN, END, body);
for (const [from, name] of [
  [beforePath, "group-commit-before.json"],
  [afterPath, "group-commit-after.json"],
] as const) {
  const to = join(root, "docs", "benchmarks", name);
  if (from !== to) copyFileSync(from, to);
}
console.log("wrote the group-commit table of BENCHMARKS.md");
