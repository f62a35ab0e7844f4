/**
 * Engine with the local dispatcher: `workflows` concurrent `pipeline` runs of
 * `steps` steps each, in this process, on a postgres.js pool of `pool`
 * connections. Per round: start every instance (their first steps held back),
 * release, wait for all to complete. Steps/s spans start → last completion.
 */
import type { Workflow } from "../../src/core/definitions.ts";
import { createEdda } from "../../src/edda.ts";
import type { Database } from "../../src/storage/database.ts";
import type { TracingApi } from "../../src/engine/tracing.ts";
import type { MetricsApi } from "../../src/engine/metrics.ts";
import { cpuMeter } from "../lib/cpu.ts";
import { BenchDispatcher, completionTracker, migrateDatabase, openEngineDatabase } from "../lib/engine.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { nowMs, percentile, sleepMs } from "../lib/stats.ts";
import { pipeline } from "../workflows.ts";

export interface EngineLocalOptions {
  workflows: number;
  steps: number;
  rounds: number;
  pool: number;
  concurrency: number;
  /** Default: the shipped `pipeline` example (transactional activities). */
  workflow?: Workflow;
  /** Default: the shipped postgres.js driver. */
  openDatabase?: (url: string, pool: number) => Database;
  /** Database name (one per variant). */
  name?: string;
  /** The `@opentelemetry/api` module (tracing-cost.ts); default: no tracing. */
  tracing?: TracingApi;
  /** `false`: every step concludes in a statement of its own (default: the engine's group commit). */
  groupCommit?: false;
  /** The `@opentelemetry/api` module (metrics-cost.ts); default: no metrics. */
  metrics?: MetricsApi;
  /** Round trips counted by a latency proxy so far; the result then gives them per step. */
  roundTrips?: () => number;
  /** Brings the fresh database's schema up (default: every migration). */
  setup?: (url: string) => Promise<void>;
}

export interface EngineLocalResult {
  steps_per_s: number;
  step_p50_ms: number | null;
  step_p99_ms: number | null;
  statements_per_step: number;
  commits_per_step: number;
  steps: number;
  seconds: number;
  skipped_steps: number;
  /** CPU per step: this process, and the Postgres backends (null without /proc). */
  node_cpu_ms_per_step: number;
  pg_cpu_ms_per_step: number | null;
  /** Over the measured rounds, the starts included; null without `roundTrips`. */
  round_trips_per_step: number | null;
  /** The same without the starts' own round trips (counted from the creating calls to their return). */
  step_round_trips_per_step: number | null;
  /** Round trips of the starts, per workflow started. */
  start_round_trips: number | null;
}

export async function runEngineLocal(pg: BenchPostgres, opts: EngineLocalOptions): Promise<EngineLocalResult> {
  const name = opts.name ?? "bench_engine_local";
  const wf = opts.workflow ?? pipeline;
  const url = await pg.createDatabase(name);
  await (opts.setup ?? migrateDatabase)(url);
  await pg.resetStats(name);
  const database = (opts.openDatabase ?? openEngineDatabase)(url, opts.pool);
  const dispatcher = new BenchDispatcher({ concurrency: opts.concurrency });
  const tracker = completionTracker();
  const edda = createEdda({ workflows: [wf], database, dispatcher, hooks: tracker.hooks, ...(opts.tracing ? { tracing: opts.tracing } : {}), ...(opts.metrics ? { metrics: opts.metrics } : {}), ...(opts.groupCommit === false ? { groupCommit: false as const } : {}) });
  let totalSteps = 0;
  let totalStarts = 0;
  const round = async (n: number) => {
    tracker.reset();
    dispatcher.hold();
    const t0 = nowMs();
    const trips0 = opts.roundTrips?.() ?? 0;
    await Promise.all(Array.from({ length: n }, () => edda.start(wf, { steps: opts.steps })));
    // The steps are held until release: what went out so far is the starts'.
    const startTrips = (opts.roundTrips?.() ?? 0) - trips0;
    const statements0 = database.stats.statements;
    dispatcher.release();
    await tracker.waitFor(n, 300_000);
    await dispatcher.idle();
    totalSteps += n * opts.steps;
    totalStarts += n;
    return { seconds: (nowMs() - t0) / 1000, statements: database.stats.statements - statements0, startTrips };
  };

  try {
    await round(Math.min(20, opts.workflows)); // warm-up: JIT, connections, prepared statements
    dispatcher.resetStats();
    const cpu = cpuMeter(name);
    const trips0 = opts.roundTrips?.() ?? 0;
    let seconds = 0;
    let statements = 0;
    let startTrips = 0;
    for (let r = 0; r < opts.rounds; r++) {
      const res = await round(opts.workflows);
      seconds += res.seconds;
      statements += res.statements;
      startTrips += res.startTrips;
    }
    const steps = opts.workflows * opts.steps * opts.rounds;
    const usage = cpu.perUnit(steps);
    const allTrips = opts.roundTrips ? opts.roundTrips() - trips0 : null;
    const trips = allTrips === null ? null : allTrips / steps;
    const stepMs = [...dispatcher.stepMs];
    const skipped = dispatcher.skipped;
    await edda.close();
    await database.close();
    await sleepMs(300);
    const commits = await pg.commits(name);
    return {
      steps_per_s: steps / seconds,
      step_p50_ms: percentile(stepMs, 50),
      step_p99_ms: percentile(stepMs, 99),
      statements_per_step: statements / steps,
      // Over every round incl. the warm-up, minus one commit per start and the definition upsert.
      commits_per_step: (commits - totalStarts - 1) / totalSteps,
      steps,
      seconds,
      skipped_steps: skipped,
      node_cpu_ms_per_step: usage.node_ms,
      pg_cpu_ms_per_step: usage.pg_ms,
      round_trips_per_step: trips,
      step_round_trips_per_step: allTrips === null ? null : (allTrips - startTrips) / steps,
      start_round_trips: allTrips === null ? null : startTrips / (opts.workflows * opts.rounds),
    };
  } finally {
    await edda.close();
    await database.close().catch(() => undefined);
  }
}
