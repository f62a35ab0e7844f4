/**
 * Steps against a Postgres one round trip of `rttMs` away (a TCP proxy adding
 * the delay, bench/lib/latency-proxy.ts). Reports:
 * - round trips per cold step (no run in memory: lease + history read,
 *   replay, conclude — what a Worker pays per step: every invocation builds
 *   its engine afresh) and per warm step (the follow-up lands in the process
 *   that keeps the run in memory: the local dispatcher);
 * - steps/s and step latency for `workflows` concurrent `steps`-step
 *   pipelines through the local dispatcher, on a pool of `pool`.
 */
import { createEdda, engineOf } from "../../src/edda.ts";
import { LocalDispatcher, type Dispatcher, type StepRequest } from "../../src/engine/dispatcher.ts";
import { Engine } from "../../src/engine/engine.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrateDatabase } from "../lib/engine.ts";
import { startLatencyProxy } from "../lib/latency-proxy.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { sleepMs } from "../lib/stats.ts";
import { runEngineLocal } from "./engine-local.ts";
import { pipeline } from "../workflows.ts";

export interface LatencyOptions {
  rttMs: number;
  workflows: number;
  steps: number;
  pool: number;
}

/** Keeps the last dispatch per instance; the caller runs the steps itself. */
class Held implements Dispatcher {
  readonly last = new Map<string, StepRequest>();
  attach(): void {}
  dispatch(req: StepRequest): void {
    this.last.set(req.instanceId, req);
  }
}

export async function runLatency(pg: BenchPostgres, opts: LatencyOptions) {
  const url = await pg.createDatabase("bench_latency");
  await migrateDatabase(url);
  const proxy = await startLatencyProxy(url, opts.rttMs);
  try {
    // Cold steps, as on Workers: every step runs on a fresh engine (no run in memory) from the handed-over lease:
    // the history is read and replayed, then the step concludes.
    const coldDb = createPostgresJsDatabase({ url: proxy.url, max: 2 });
    const held = new Held();
    const storage = createStorage(coldDb);
    const fresh = () => new Engine({ storage, workflows: [pipeline], dispatcher: held });
    await fresh().start(pipeline, { steps: opts.steps }, { instanceId: "cold-1" });
    const coldTrips: number[] = [];
    let coldMsTotal = 0;
    for (let i = 0; i < 100; i++) {
      const req = held.last.get("cold-1");
      held.last.delete("cold-1");
      if (!req) break;
      const before = proxy.roundTrips();
      const t0 = performance.now();
      await fresh().runStep(req);
      if (i > 0) {
        // The first step also opens the connections and prepares statements.
        coldMsTotal += performance.now() - t0;
        coldTrips.push(proxy.roundTrips() - before);
      }
    }
    const coldMs = coldMsTotal / Math.max(1, coldTrips.length);
    await coldDb.close();

    // Warm steps: the follow-up lands in this process and continues the run in memory.
    const warmDb = createPostgresJsDatabase({ url: proxy.url, max: 2 });
    const dispatcher = new LocalDispatcher({ concurrency: 1 });
    const warm = createEdda({ workflows: [pipeline], database: warmDb, dispatcher });
    await warm.start(pipeline, { steps: 2 }, { instanceId: "warm-0" }); // warm-up
    await dispatcher.idle();
    await sleepMs(50);
    const started = await warm.start(pipeline, { steps: opts.steps + 1 }, { instanceId: "warm-1" });
    // Measure from the second step on: the first is a cold acquisition after the start.
    const engine = await engineOf(warm);
    while (((await engine.storage.loadHistory(started.instanceId)).length) < 1) await sleepMs(1);
    const trips0 = proxy.roundTrips();
    const warmT0 = performance.now();
    await dispatcher.idle();
    const history = (await engine.storage.loadHistory(started.instanceId)).length;
    const warmSteps = opts.steps + 1 - 1;
    const warmMs = (performance.now() - warmT0) / warmSteps;
    const warmTrips = proxy.roundTrips() - trips0 - 1; // minus the history poll above
    await warm.close();
    await warmDb.close();

    // Throughput: concurrent pipelines through the local dispatcher, every statement a round trip away.
    const through = await runEngineLocal(pg, {
      workflows: opts.workflows,
      steps: opts.steps,
      rounds: 1,
      pool: opts.pool,
      concurrency: opts.pool,
      name: "bench_latency_local",
      openDatabase: (dbUrl, max) => createPostgresJsDatabase({ url: Object.assign(new URL(dbUrl), { host: new URL(proxy.url).host }).toString(), max }),
    });
    return {
      latency_rtt_ms: opts.rttMs,
      latency_cold_round_trips_per_step: median(coldTrips),
      latency_cold_step_ms: coldMs,
      latency_warm_round_trips_per_step: history >= warmSteps ? warmTrips / warmSteps : null,
      latency_warm_step_ms: warmMs,
      latency_local_steps_per_s: through.steps_per_s,
      latency_local_step_p50_ms: through.step_p50_ms,
      latency_local_step_p99_ms: through.step_p99_ms,
    };
  } finally {
    await proxy.stop();
  }
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
