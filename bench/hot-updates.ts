/**
 * `npx tsx bench/hot-updates.ts [--passes=3]` — what migration 0009 (the
 * instance indexes reviewed, fillfactor 80) does to a step, in one run on one
 * Postgres: the `local` scenario's workload (200 concurrent 10-step
 * `pipeline`s, pool 10) on a database migrated up to 0008 ("before": 16
 * indexes on workflow_instances, fillfactor 100) and on one migrated fully
 * ("after"), alternating, `passes` times each. Reports steps/s (median over
 * passes) and the share of workflow_instances updates Postgres made HOT
 * (pg_stat_user_tables n_tup_hot_upd / n_tup_upd, summed over the passes).
 * Both run this tree's code, so the figures isolate the schema. Writes the
 * result between the `hot:begin` / `hot:end` markers of BENCHMARKS.md (a
 * run with `--no-write` only prints). Benchmark, not test: nothing asserts.
 */
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeGeneratedSection } from "./lib/generated-section.ts";
import postgres from "postgres";
import { createPostgresJsDatabase } from "../src/storage/drivers/postgres-js.ts";
import { applyMigrations } from "../src/storage/migrate.ts";
import { MIGRATIONS } from "../src/storage/migrations.gen.ts";
import { openBenchPostgres, type BenchPostgres } from "./lib/postgres.ts";
import { median, round, sleepMs } from "./lib/stats.ts";
import { runEngineLocal } from "./scenarios/engine-local.ts";

const passes = Number(process.argv.find((a) => a.startsWith("--passes="))?.slice(9) ?? 3);
const HOT = "0009_instances_hot_updates";
if (!MIGRATIONS.some((m) => m.tag === HOT)) throw new Error(`no migration ${HOT}`);

const variants = {
  before: MIGRATIONS.filter((m) => m.tag < HOT),
  after: MIGRATIONS,
};
type Variant = keyof typeof variants;

async function migrateTo(url: string, migrations: typeof MIGRATIONS): Promise<void> {
  const setup = createPostgresJsDatabase({ url, max: 1 });
  try {
    await applyMigrations(setup.db, migrations);
  } finally {
    await setup.close();
  }
  await sleepMs(200);
}

async function instanceStats(pg: BenchPostgres, name: string): Promise<{ upd: number; hot: number; indexes: number }> {
  const url = new URL(pg.adminUrl);
  url.pathname = `/${name}`;
  const sql = postgres(url.toString(), { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ upd: string; hot: string; indexes: string }[]>`
      SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot,
             (SELECT count(*) FROM pg_indexes WHERE tablename = 'workflow_instances')::text AS indexes
      FROM pg_stat_user_tables WHERE relname = 'workflow_instances'`;
    return { upd: Number(row?.upd ?? 0), hot: Number(row?.hot ?? 0), indexes: Number(row?.indexes ?? 0) };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const pg = await openBenchPostgres();
const load0 = loadavg();
const startedAt = new Date().toISOString();
const out: Record<Variant, { sps: number[]; upd: number; hot: number; indexes: number; nodeCpu: number[]; pgCpu: number[] }> = {
  before: { sps: [], upd: 0, hot: 0, indexes: 0, nodeCpu: [], pgCpu: [] },
  after: { sps: [], upd: 0, hot: 0, indexes: 0, nodeCpu: [], pgCpu: [] },
};
try {
  for (let pass = 0; pass < passes; pass++) {
    const order: Variant[] = pass % 2 === 0 ? ["before", "after"] : ["after", "before"];
    for (const v of order) {
      const name = `bench_hot_${v}`;
      const r = await runEngineLocal(pg, { workflows: 200, steps: 10, rounds: 2, pool: 10, concurrency: 10, name, setup: (url) => migrateTo(url, variants[v]) });
      await sleepMs(700); // the backends report their table counters as they exit
      const s = await instanceStats(pg, name);
      const o = out[v];
      o.sps.push(r.steps_per_s);
      o.nodeCpu.push(r.node_cpu_ms_per_step);
      if (r.pg_cpu_ms_per_step !== null) o.pgCpu.push(r.pg_cpu_ms_per_step);
      o.upd += s.upd;
      o.hot += s.hot;
      o.indexes = s.indexes;
      process.stderr.write(`pass ${pass + 1} ${v}: ${Math.round(r.steps_per_s)} steps/s, ${s.hot}/${s.upd} HOT updates\n`);
    }
  }
  const load1 = loadavg();
  const l = (xs: number[]) => xs.map((x) => x.toFixed(1)).join(" / ");
  const lines = [
    `Run of ${startedAt.slice(0, 16).replace("T", " ")} UTC, Postgres ${String((await pg.settings()).server_version).split(" ")[0]} (the throwaway cluster, fsync off), ` +
      `${passes} passes per schema alternating, 200 concurrent 10-step \`pipeline\`s × 2 rounds + warm-up, pool 10; load average ${l(load0)} at the start, ${l(load1)} at the end.`,
    "",
    "| schema | indexes on workflow_instances | HOT updates | steps/s (median; passes) | CPU per step: Node / Postgres |",
    "|---|---:|---:|---:|---:|",
  ];
  for (const v of ["before", "after"] as const) {
    const o = out[v];
    lines.push(
      `| ${v === "before" ? "up to 0008" : "with 0009"} | ${o.indexes} | ${o.hot.toLocaleString("en-US")} of ${o.upd.toLocaleString("en-US")} (${((100 * o.hot) / Math.max(1, o.upd)).toFixed(1)} %) | ` +
        `${round(median(o.sps), 0)} (${o.sps.map((x) => Math.round(x)).join(", ")}) | ${round(median(o.nodeCpu), 2)} / ${round(median(o.pgCpu), 2)} ms |`,
    );
  }
  console.log(lines.join("\n"));
  if (!process.argv.includes("--no-write")) {
    const path = join(dirname(fileURLToPath(import.meta.url)), "..", "BENCHMARKS.md");
    const BEGIN = "<!-- hot:begin (bench/hot-updates.ts writes this section) -->";
    const END = "<!-- hot:end -->";
    writeGeneratedSection(path, BEGIN, END, lines.join("\n"));
  }
} finally {
  await pg.stop();
}
