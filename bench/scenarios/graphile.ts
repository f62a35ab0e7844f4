/**
 * Peer: the 10-step pipeline on graphile-worker, a Postgres job queue with no
 * workflow model: each step is one job, and a step's job adds the next step's
 * job before it completes (the chained-jobs pattern). Per step the worker
 * takes the job (`get_job`), the step adds its successor (`add_job`), the
 * worker marks it done (`complete_job`): three autocommitted statements, and
 * nothing ties the successor's insert to the completion (a crash between them
 * runs the step again). Same process, same Postgres server (its own database),
 * a pool of `pool` connections (one of them kept for LISTEN) and `pool` jobs at
 * once, the library's own recommendation of concurrency ≤ pool.
 */
import { Logger, run, type Runner } from "graphile-worker";
import { cpuMeter } from "../lib/cpu.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { nowMs } from "../lib/stats.ts";
import type { PeerOptions, PeerResult } from "./absurd.ts";

interface StepPayload {
  steps: number;
  i: number;
}

export async function runGraphile(pgServer: BenchPostgres, opts: PeerOptions): Promise<PeerResult> {
  const name = opts.name ?? "bench_graphile";
  const url = await pgServer.createDatabase(name);
  let completed = 0;
  let waiter: { n: number; resolve: () => void } | null = null;
  // Errors only: its info lines (worker started, migrations) would hide the table.
  const logger = new Logger(() => (level, message) => {
    if (level === "error") console.error(`graphile-worker: ${message}`);
  });
  const runner: Runner = await run({
    connectionString: opts.via ? opts.via(url) : url,
    maxPoolSize: opts.pool,
    concurrency: opts.pool,
    noHandleSignals: true,
    pollInterval: 1000,
    logger,
    taskList: {
      pipeline_step: async (payload, helpers) => {
        const p = payload as StepPayload;
        if (p.i < p.steps) await helpers.addJob("pipeline_step", { steps: p.steps, i: p.i + 1 });
      },
    },
  });
  // A pipeline is done when its last step's job completes.
  runner.events.on("job:complete", ({ job, error }) => {
    const p = job.payload as StepPayload;
    if (error || p.i !== p.steps) return;
    completed++;
    if (waiter && completed >= waiter.n) waiter.resolve();
  });
  const round = async (n: number) => {
    completed = 0;
    const done = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`graphile-worker: only ${completed}/${n} pipelines completed after 300 s`)), 300_000);
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
    await Promise.all(Array.from({ length: n }, () => runner.addJob("pipeline_step", { steps: opts.steps, i: 1 })));
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
    await runner.stop();
  }
}
