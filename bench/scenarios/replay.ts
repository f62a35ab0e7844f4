/**
 * Replay scaling: the latency of one more step of an instance whose history
 * already holds 10, 100 or 1,000 entries. The history is built in one step
 * (activities of one tick run together); then single-activity steps are
 * timed one by one, each taking the lease its predecessor handed off — the
 * normal path: history read, full replay, activity, fenced conclusion.
 * Nothing runs concurrently, so the figure is the step's own latency.
 */
import { createEdda } from "../../src/http/edda.ts";
import { migrateDatabase, openEngineDatabase, RecordingDispatcher } from "../lib/engine.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { median, nowMs, percentile } from "../lib/stats.ts";
import { replayProbe } from "../workflows.ts";

export interface ReplayOptions {
  histories: number[];
  instances: number;
  probes: number;
}

export type ReplayResult = Record<string, number | null>;

export async function runReplay(pg: BenchPostgres, opts: ReplayOptions): Promise<ReplayResult> {
  const url = await pg.createDatabase("bench_replay");
  await migrateDatabase(url);
  const database = openEngineDatabase(url, 2);
  const dispatcher = new RecordingDispatcher();
  const edda = createEdda({ workflows: [replayProbe], database, dispatcher });
  const engine = await edda.engine();
  const out: ReplayResult = {};
  try {
    // Warm-up: JIT and prepared statements before the first timed size.
    for (const h of [10, ...opts.histories]) {
      const samples: number[] = [];
      for (let i = 0; i < opts.instances; i++) {
        const { instanceId } = await edda.start(replayProbe, { history: h, probes: opts.probes });
        await engine.runStep(dispatcher.take(instanceId)); // builds the history
        for (let p = 0; p < opts.probes; p++) {
          const req = dispatcher.take(instanceId);
          const t0 = nowMs();
          const r = await engine.runStep(req);
          samples.push(nowMs() - t0);
          if (r.status !== "concluded") throw new Error(`replay probe step was ${JSON.stringify(r)}`);
        }
      }
      out[`replay_ms_h${h}`] = median(samples);
      out[`replay_p90_ms_h${h}`] = percentile(samples, 90);
    }
    return out;
  } finally {
    await edda.close();
    await database.close();
  }
}
