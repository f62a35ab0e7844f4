/**
 * Replay scaling: the latency of one more step of an instance whose history
 * already holds 10, 100 or 1,000 entries, on both paths a step can take.
 * The history is built in one step (activities of one tick run together);
 * then single-activity steps are timed one by one, alternating:
 *  - cold: the handed lease is released and the warm run dropped, so the
 *    step acquires the lease and reads and replays the whole history — what
 *    a fresh process, a Worker request or a sweeper-resumed instance pays;
 *  - warm: the follow-up takes the lease its predecessor handed off in this
 *    process and continues the run kept in memory (src/engine/warm-runs.ts):
 *    no history read, no replay — the steady state with the local dispatcher.
 * Nothing runs concurrently, so each figure is the step's own latency.
 */
import { createEdda, engineOf } from "../../src/edda.ts";
import { migrateDatabase, openEngineDatabase, RecordingDispatcher } from "../lib/engine.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { median, nowMs, percentile } from "../lib/stats.ts";
import { replayProbe } from "../workflows.ts";

export interface ReplayOptions {
  histories: number[];
  instances: number;
  /** Timed steps per instance, half cold, half warm. */
  probes: number;
}

export type ReplayResult = Record<string, number | null>;

export async function runReplay(pg: BenchPostgres, opts: ReplayOptions): Promise<ReplayResult> {
  const url = await pg.createDatabase("bench_replay");
  await migrateDatabase(url);
  const database = openEngineDatabase(url, 2);
  const dispatcher = new RecordingDispatcher();
  const edda = createEdda({ workflows: [replayProbe], database, dispatcher });
  const engine = await engineOf(edda);
  const out: ReplayResult = {};
  try {
    // Warm-up: JIT and prepared statements before the first timed size.
    for (const h of [10, ...opts.histories]) {
      const cold: number[] = [];
      const coldCpu: number[] = [];
      const warm: number[] = [];
      for (let i = 0; i < opts.instances; i++) {
        const { instanceId } = await edda.start(replayProbe, { history: h, probes: opts.probes });
        await engine.runStep(dispatcher.take(instanceId)); // builds the history
        for (let p = 0; p < opts.probes; p++) {
          let req = dispatcher.take(instanceId);
          const isCold = p % 2 === 0;
          if (isCold) {
            engine.warmRuns.drop(instanceId);
            if (!req.lease || !(await engine.storage.releaseLease({ instanceId, ...req.lease }))) throw new Error("replay probe: no handed lease to release");
            req = { instanceId };
          }
          const hits = engine.warmRuns.hits;
          const cpu0 = process.cpuUsage();
          const t0 = nowMs();
          const r = await engine.runStep(req);
          (isCold ? cold : warm).push(nowMs() - t0);
          const cpu = process.cpuUsage(cpu0);
          if (isCold) coldCpu.push((cpu.user + cpu.system) / 1000);
          if (r.status !== "concluded") throw new Error(`replay probe step was ${JSON.stringify(r)}`);
          if (engine.warmRuns.hits !== hits + (isCold ? 0 : 1)) throw new Error(`replay probe: ${isCold ? "cold step hit" : "warm step missed"} a warm run`);
        }
      }
      out[`replay_ms_h${h}`] = median(warm);
      out[`replay_p90_ms_h${h}`] = percentile(warm, 90);
      out[`replay_cold_ms_h${h}`] = median(cold);
      out[`replay_cold_p90_ms_h${h}`] = percentile(cold, 90);
      // This process's CPU in the cold step (steps run one at a time): the history's decoding and replay, the driver.
      out[`replay_cold_cpu_ms_h${h}`] = median(coldCpu);
    }
    // The cold step's cost per history entry: the slope between the smallest and the largest history.
    const lo = Math.min(...opts.histories);
    const hi = Math.max(...opts.histories);
    const [coldLo, coldHi] = [out[`replay_cold_ms_h${lo}`], out[`replay_cold_ms_h${hi}`]];
    out.replay_cold_us_per_entry = hi > lo && typeof coldLo === "number" && typeof coldHi === "number" ? ((coldHi - coldLo) / (hi - lo)) * 1000 : null;
    const [cpuLo, cpuHi] = [out[`replay_cold_cpu_ms_h${lo}`], out[`replay_cold_cpu_ms_h${hi}`]];
    out.replay_cold_cpu_us_per_entry = hi > lo && typeof cpuLo === "number" && typeof cpuHi === "number" ? ((cpuHi - cpuLo) / (hi - lo)) * 1000 : null;
    return out;
  } finally {
    await edda.close();
    await database.close();
  }
}
