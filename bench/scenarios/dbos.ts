/**
 * The peer: the same 10-step pipeline on DBOS Transact (@dbos-inc/dbos-sdk),
 * in this process, against the same Postgres server (its own system database),
 * with the same pool size. DBOS runs a workflow as one in-process call and
 * checkpoints each step's output (one INSERT per step, autocommit), so it
 * never replays between steps; its steps are not transactions with user
 * writes (the engine's pipeline steps are).
 */
import { DBOS } from "@dbos-inc/dbos-sdk";
import { cpuMeter } from "../lib/cpu.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { nowMs, sleepMs } from "../lib/stats.ts";

export interface DbosOptions {
  workflows: number;
  steps: number;
  rounds: number;
  pool: number;
  /** Database name (one per variant). */
  name?: string;
  /** Maps the database url to the one DBOS uses (the latency proxy). */
  via?: (url: string) => string;
  /** Round trips counted by the proxy so far; the result then gives them per step. */
  roundTrips?: () => number;
}

export interface DbosResult {
  dbos_steps_per_s: number;
  dbos_commits_per_step: number;
  dbos_node_cpu_ms_per_step: number;
  dbos_pg_cpu_ms_per_step: number | null;
  /** Null without `roundTrips`. */
  dbos_round_trips_per_step: number | null;
  steps: number;
  seconds: number;
}

const pipelineStep = async (n: number) => ({ n });

const dbosPipeline = DBOS.registerWorkflow(
  async (steps: number) => {
    for (let i = 1; i <= steps; i++) await DBOS.runStep(() => pipelineStep(i), { name: "pipeline_step" });
    return { completed: steps };
  },
  { name: "pipeline" },
);

export async function runDbos(pg: BenchPostgres, opts: DbosOptions): Promise<DbosResult> {
  const name = opts.name ?? "bench_dbos";
  const url = await pg.createDatabase(name);
  DBOS.setConfig({ name: "edda-bench", systemDatabaseUrl: opts.via ? opts.via(url) : url, systemDatabasePoolSize: opts.pool, logLevel: "error" });
  await DBOS.launch();
  let launched = true;
  let totalWorkflows = 0;
  const round = async (n: number) => {
    const t0 = nowMs();
    await Promise.all(Array.from({ length: n }, () => dbosPipeline(opts.steps)));
    totalWorkflows += n;
    return (nowMs() - t0) / 1000;
  };
  try {
    await round(Math.min(20, opts.workflows)); // warm-up
    await DBOS.shutdown();
    launched = false;
    // Count commits of the measured rounds only: reset after the warm-up's connections are gone.
    await sleepMs(300);
    await pg.resetStats(name);
    await DBOS.launch();
    launched = true;
    totalWorkflows = 0;
    const cpu = cpuMeter(name);
    const trips0 = opts.roundTrips?.() ?? 0;
    let seconds = 0;
    for (let r = 0; r < opts.rounds; r++) seconds += await round(opts.workflows);
    const usage = cpu.perUnit(opts.workflows * opts.steps * opts.rounds);
    const trips = opts.roundTrips ? (opts.roundTrips() - trips0) / (opts.workflows * opts.steps * opts.rounds) : null;
    await DBOS.shutdown();
    launched = false;
    await sleepMs(300);
    const commits = await pg.commits(name);
    const steps = opts.workflows * opts.steps * opts.rounds;
    return { dbos_steps_per_s: steps / seconds, dbos_commits_per_step: commits / (totalWorkflows * opts.steps), dbos_node_cpu_ms_per_step: usage.node_ms, dbos_pg_cpu_ms_per_step: usage.pg_ms, dbos_round_trips_per_step: trips, steps, seconds };
  } finally {
    if (launched) await DBOS.shutdown().catch(() => undefined);
  }
}
