/**
 * `npx tsx bench/group-commit-ab.ts [--write]`
 *
 * Group commit on against off at one commit: the local scenario (200 × 10-step
 * `pipeline`, pool 10, dispatcher concurrency 10) run alternately with and
 * without it — on a Postgres with fsync off, then on a durable one (fsync and
 * synchronous_commit on) — so that JIT warm-up and the shared machine's drift
 * do not favour one side (the main bench runs each variant once, in a fixed
 * order). Medians per side. `--write` puts the table in BENCHMARKS.md between
 * its `group-commit-ab:begin` / `group-commit-ab:end` markers. Benchmark, not
 * test: nothing asserts.
 */
import { execFileSync } from "node:child_process";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeGeneratedSection } from "./lib/generated-section.ts";
import { openBenchPostgres } from "./lib/postgres.ts";
import { median } from "./lib/stats.ts";
import { runEngineLocal, type EngineLocalResult } from "./scenarios/engine-local.ts";

const base = { workflows: 200, steps: 10, rounds: 2, pool: 10, concurrency: 10 };
const PAIRS = { fast: 3, durable: 2 };
const load0 = loadavg();
const started = new Date().toISOString();
const rows: string[] = [];

for (const durable of [false, true]) {
  const pg = await openBenchPostgres(undefined, { durable });
  const runs: Record<"on" | "off", EngineLocalResult[]> = { on: [], off: [] };
  try {
    for (let i = 0; i < (durable ? PAIRS.durable : PAIRS.fast); i++) {
      for (const side of ["on", "off"] as const) {
        const r = await runEngineLocal(pg, { ...base, name: `bench_gc_ab_${side}_${i}`, ...(side === "off" ? { groupCommit: false as const } : {}) });
        runs[side].push(r);
        process.stderr.write(`${durable ? "durable" : "fsync off"} ${side}: ${Math.round(r.steps_per_s)} steps/s\n`);
      }
    }
  } finally {
    await pg.stop();
  }
  const m = (side: "on" | "off", f: (r: EngineLocalResult) => number | null) => median(runs[side].map(f).filter((x): x is number => x !== null));
  const line = (label: string, f: (r: EngineLocalResult) => number | null, digits: number) =>
    `| ${durable ? "durable" : "fsync off"}: ${label} | ${m("on", f)?.toFixed(digits) ?? "—"} | ${m("off", f)?.toFixed(digits) ?? "—"} |`;
  rows.push(
    line("steps/s", (r) => r.steps_per_s, 0),
    line("statements per step", (r) => r.statements_per_step, 2),
    line("CPU per step, engine process, ms", (r) => r.node_cpu_ms_per_step, 3),
    line("CPU per step, Postgres backends, ms", (r) => r.pg_cpu_ms_per_step, 3),
    line("step p50, ms", (r) => r.step_p50_ms, 1),
  );
}

const commit = (() => {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return "?";
  }
})();
const fmtLoad = (l: number[]) => l.map((x) => x.toFixed(1)).join("/");
const body = `Group commit on and off at commit \`${commit}\`, ${started.slice(0, 16).replace("T", " ")} UTC, load ${fmtLoad(load0)} → ${fmtLoad(loadavg())}: the local scenario run alternately, ${PAIRS.fast} pairs on fsync off and ${PAIRS.durable} on a durable Postgres, medians (\`npx tsx bench/group-commit-ab.ts --write\` writes this table).

| figure | group commit on | off |
| --- | ---: | ---: |
${rows.join("\n")}`;
console.log(body);

if (process.argv.includes("--write")) {
  const path = join(dirname(fileURLToPath(import.meta.url)), "..", "BENCHMARKS.md");
  const BEGIN = "<!-- group-commit-ab:begin (bench/group-commit-ab.ts writes this section) -->";
  const END = "<!-- group-commit-ab:end -->";
  writeGeneratedSection(path, BEGIN, END, body);
}
