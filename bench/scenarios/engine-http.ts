/**
 * Engine with the http dispatcher: the same pipeline workload started over
 * HTTP on real Node servers in a ring, every follow-up step a signed
 * `POST /_edda/step` to the next server. The servers run in this process (one
 * event loop), so the figure is comparable with the local dispatcher's.
 */
import type { BenchPostgres } from "../lib/postgres.ts";
import { cpuMeter } from "../lib/cpu.ts";
import { completionTracker, migrateDatabase } from "../lib/engine.ts";
import { startServerRing, startViaHttp } from "../lib/servers.ts";
import { nowMs } from "../lib/stats.ts";
import { pipeline } from "../workflows.ts";

export interface EngineHttpOptions {
  servers: number;
  workflows: number;
  steps: number;
  rounds: number;
}

export interface EngineHttpResult {
  http_steps_per_s: number;
  http_statements_per_step: number;
  /** This process's CPU per step (both servers and the starting client run in it), as node_cpu_ms_per_step is measured. */
  http_cpu_ms_per_step: number;
  http_pg_cpu_ms_per_step: number | null;
  servers: number;
  steps: number;
  seconds: number;
}

export async function runEngineHttp(pg: BenchPostgres, opts: EngineHttpOptions): Promise<EngineHttpResult> {
  const url = await pg.createDatabase("bench_engine_http");
  await migrateDatabase(url);
  const tracker = completionTracker();
  const ring = await startServerRing({ count: opts.servers, databaseUrl: url, workflows: [pipeline], secret: "bench-secret", hooks: tracker.hooks });
  const round = async (n: number) => {
    tracker.reset();
    const t0 = nowMs();
    const statements0 = ring.statements();
    await Promise.all(Array.from({ length: n }, (_, i) => startViaHttp(ring.urls[i % ring.urls.length]!, pipeline.workflowName, { steps: opts.steps })));
    await tracker.waitFor(n, 300_000);
    return { seconds: (nowMs() - t0) / 1000, statements: ring.statements() - statements0 - n };
  };
  try {
    await round(Math.min(20, opts.workflows)); // warm-up
    const cpu = cpuMeter("bench_engine_http");
    let seconds = 0;
    let statements = 0;
    for (let r = 0; r < opts.rounds; r++) {
      const res = await round(opts.workflows);
      seconds += res.seconds;
      statements += res.statements;
    }
    const steps = opts.workflows * opts.steps * opts.rounds;
    const usage = cpu.perUnit(steps);
    return { http_steps_per_s: steps / seconds, http_statements_per_step: statements / steps, http_cpu_ms_per_step: usage.node_ms, http_pg_cpu_ms_per_step: usage.pg_ms, servers: opts.servers, steps, seconds };
  } finally {
    await ring.close();
  }
}
