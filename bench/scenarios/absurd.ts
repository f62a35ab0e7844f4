/**
 * Peer: the same 10-step pipeline on Absurd (npm `absurd-sdk`), in this
 * process, against the same Postgres server (its own database, schema from
 * bench/vendor/absurd/absurd.sql), on a node-postgres pool of the same size.
 * An Absurd task runs as one in-process call; each `ctx.step` checkpoints its
 * result with one SQL function call (`set_task_checkpoint_state`, autocommit),
 * so a running task never replays between steps. Like DBOS's, its steps are
 * not transactions with user writes (the engine's pipeline steps are).
 *
 * The worker claims up to `workflows` tasks at once (every pipeline in flight,
 * as DBOS runs them), polls every 50 ms when idle (default 250 ms: it would
 * only add idle time at a round's start).
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Absurd } from "absurd-sdk";
import pg from "pg";
import { cpuMeter } from "../lib/cpu.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { nowMs } from "../lib/stats.ts";

export interface PeerOptions {
  workflows: number;
  steps: number;
  rounds: number;
  pool: number;
  /** Database name (one per variant). */
  name?: string;
  /** Maps the database url to the one the measured client uses (the latency proxy). */
  via?: (url: string) => string;
  /** Round trips counted by the proxy so far; the result then gives them per step. */
  roundTrips?: () => number;
}

export interface PeerResult {
  steps_per_s: number;
  node_cpu_ms_per_step: number;
  pg_cpu_ms_per_step: number | null;
  /** Null without `roundTrips`. */
  round_trips_per_step: number | null;
  steps: number;
  seconds: number;
}

const SCHEMA = join(dirname(fileURLToPath(import.meta.url)), "..", "vendor", "absurd", "absurd.sql");
const QUEUE = "bench";

/** Applies Absurd's schema and creates the queue, over a short-lived connection. */
async function installAbsurd(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(readFileSync(SCHEMA, "utf8")); // simple protocol: the whole file in one go
    await client.query("SELECT absurd.create_queue($1)", [QUEUE]);
  } finally {
    await client.end();
  }
}

export async function runAbsurd(pgServer: BenchPostgres, opts: PeerOptions): Promise<PeerResult> {
  const name = opts.name ?? "bench_absurd";
  const url = await pgServer.createDatabase(name);
  await installAbsurd(url);
  const pool = new pg.Pool({ connectionString: opts.via ? opts.via(url) : url, max: opts.pool });
  let completed = 0;
  let waiter: { n: number; resolve: () => void } | null = null;
  const quiet = { log() {}, info() {}, warn: console.warn, error: console.error };
  const app = new Absurd({
    db: pool,
    queueName: QUEUE,
    log: quiet,
    hooks: {
      // Counted once the task's completion is written (`complete_run` runs inside `execute`).
      wrapTaskExecution: async (_ctx, execute) => {
        const r = await execute();
        completed++;
        if (waiter && completed >= waiter.n) waiter.resolve();
        return r;
      },
    },
  });
  app.registerTask({ name: "pipeline" }, async (params: { steps: number }, ctx) => {
    for (let i = 1; i <= params.steps; i++) await ctx.step("pipeline_step", async () => ({ n: i }));
    return { completed: params.steps };
  });
  const worker = await app.startWorker({ concurrency: opts.workflows, pollInterval: 0.05, claimTimeout: 300, fatalOnLeaseTimeout: false });
  const round = async (n: number) => {
    completed = 0;
    const done = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`absurd: only ${completed}/${n} tasks completed after 300 s`)), 300_000);
      waiter = {
        n,
        resolve: () => {
          clearTimeout(timer);
          waiter = null;
          resolve();
        },
      };
    });
    const t0 = nowMs();
    await Promise.all(Array.from({ length: n }, () => app.spawn("pipeline", { steps: opts.steps })));
    await done;
    return (nowMs() - t0) / 1000;
  };
  try {
    await round(Math.min(20, opts.workflows)); // warm-up
    const cpu = cpuMeter(name);
    const trips0 = opts.roundTrips?.() ?? 0;
    let seconds = 0;
    for (let r = 0; r < opts.rounds; r++) seconds += await round(opts.workflows);
    const steps = opts.workflows * opts.steps * opts.rounds;
    const usage = cpu.perUnit(steps);
    const trips = opts.roundTrips ? (opts.roundTrips() - trips0) / steps : null;
    return { steps_per_s: steps / seconds, node_cpu_ms_per_step: usage.node_ms, pg_cpu_ms_per_step: usage.pg_ms, round_trips_per_step: trips, steps, seconds };
  } finally {
    await worker.close();
    await app.close();
    await pool.end().catch(() => undefined);
  }
}
