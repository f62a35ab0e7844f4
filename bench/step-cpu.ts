/**
 * CPU time of one step — what Workers bill and limit — for an instance whose
 * history already holds 100 entries, against one with an empty history.
 *
 * The 100 entries are written by one step (100 activities of one tick); the
 * timed step is the next one. "cold" is what a Worker pays (the app is built
 * per request, so no warm run survives between steps): the handed lease's
 * history read (100 rows through postgres.js), one replay of the workflow over
 * them (the look-ahead continues that run), one activity, the fenced
 * conclusion. "warm" is a follow-up landing in the same process (the local
 * dispatcher): the run kept in memory continues, no history read, no replay.
 * CPU is `process.cpuUsage()` around that step alone, steps run one at a time,
 * so it is this step's own JavaScript work (V8, as in workerd) plus the
 * driver's; Postgres runs in other processes and is not counted. Benchmark,
 * not test: nothing asserts.
 *
 *   npx tsx bench/step-cpu.ts            (throwaway Postgres cluster)
 *   DATABASE_URL=postgres://... npx tsx bench/step-cpu.ts
 *   npx tsx bench/step-cpu.ts --into=bench/results/latest.json   (adds the medians to a bench run's results)
 *   npx tsx bench/step-cpu.ts --update-docs   (also writes the step-cpu block of docs/deploy-cloudflare.md)
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { activity, workflow } from "../src/index.ts";
import type { Dispatcher, StepRequest } from "../src/engine/dispatcher.ts";
import { createEdda, engineOf } from "../src/edda.ts";
import { createPostgresJsDatabase } from "../src/storage/drivers/postgres-js.ts";
import { migrate } from "../src/storage/migrate.ts";
import { createDatabase, startPostgresCluster } from "../test/support/postgres-cluster.ts";
import { wantsDocsUpdate, writeFigureBlock } from "./readme-figures.ts";

const INSTANCES = 60;
const WARMUP = 10;

class RecordingDispatcher implements Dispatcher {
  readonly requests: StepRequest[] = [];
  attach(): void {}
  dispatch(req: StepRequest): void {
    this.requests.push(req);
  }
}

const fill = activity("cpu_fill", async (_ctx, i: number) => ({ i, note: `entry ${i}`, tags: ["a", "b"] }));
const probe = activity("cpu_probe", async (_ctx, i: number) => ({ probed: i }));
const probeFlow = workflow("cpu_probe_flow", async (ctx, history: number) => {
  if (history > 0) await Promise.all(Array.from({ length: history }, (_, i) => fill(ctx, i)));
  await probe(ctx, 1);
  await probe(ctx, 2);
  return "done";
});

const cluster = process.env.DATABASE_URL ? null : await startPostgresCluster();
const adminUrl = process.env.DATABASE_URL ?? cluster!.url;
const url = await createDatabase(adminUrl, `bench_step_cpu_${Date.now().toString(36)}`);
const database = createPostgresJsDatabase({ url, max: 2 });
await migrate(database.db);
const dispatcher = new RecordingDispatcher();
const edda = createEdda({ workflows: [probeFlow], database, dispatcher });
const engine = await engineOf(edda);

/** CPU ms of the step that runs at exactly `history` entries. */
async function measure(history: number, instanceId: string, warm: boolean): Promise<{ cpu: number; wall: number; entries: number }> {
  await engine.start(probeFlow, history, { instanceId });
  if (history > 0) await engine.runStep(dispatcher.requests.shift()!); // writes the history in one step
  const req = dispatcher.requests.shift()!;
  if (!warm) engine.warmRuns.drop(instanceId);
  const hits = engine.warmRuns.hits;
  const entries = (await engine.storage.loadHistory(instanceId)).length;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await engine.runStep(req);
  const wall = performance.now() - t0;
  const d = process.cpuUsage(cpu0);
  if (warm && engine.warmRuns.hits !== hits + 1) throw new Error("the warm step did not continue a warm run");
  dispatcher.requests.length = 0;
  return { cpu: (d.user + d.system) / 1000, wall, entries };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;
const results: Record<string, { cpu: number[]; wall: number[]; entries: number; path: string }> = {};
for (const [path, history] of [["cold", 0], ["cold", 100], ["warm", 100]] as const) {
  const r = { cpu: [] as number[], wall: [] as number[], entries: 0, path };
  for (let i = 0; i < WARMUP + INSTANCES; i++) {
    const m = await measure(history, `${path}-h${history}-${i}`, path === "warm");
    if (i < WARMUP) continue;
    r.cpu.push(m.cpu);
    r.wall.push(m.wall);
    r.entries = m.entries;
  }
  results[`${path}${history}`] = r;
}

console.log(`step CPU time (Node ${process.version}, postgres.js; ${INSTANCES} steps each after ${WARMUP} warm-up)`);
for (const r of Object.values(results)) {
  console.log(
    `  ${r.path}, history ${String(r.entries).padStart(3)} entries: CPU median ${pct(r.cpu, 50).toFixed(2)} ms, p90 ${pct(r.cpu, 90).toFixed(2)} ms; wall median ${pct(r.wall, 50).toFixed(2)} ms`,
  );
}
const into = process.argv.find((a) => a.startsWith("--into="))?.slice(7);
if (into) {
  // The medians beside a bench run's figures (bench/lean-report.ts reads them from there), with this run's load.
  const run = JSON.parse(readFileSync(into, "utf8")) as Record<string, unknown>;
  for (const [key, r] of Object.entries(results)) run[`step_cpu_${key}_ms`] = Number(pct(r.cpu, 50).toFixed(3));
  run.step_cpu_loadavg = loadavg().map((l) => Number(l.toFixed(2)));
  writeFileSync(into, JSON.stringify(run, null, 2) + "\n");
}
if (wantsDocsUpdate()) {
  const ms = (xs: number[], p: number) => pct(xs, p).toFixed(2);
  const [cold0, cold100, warm100] = [results.cold0!, results.cold100!, results.warm100!];
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  const load = loadavg().map((l) => l.toFixed(1)).join("/");
  writeFigureBlock(
    "step-cpu",
    `- **CPU time of a step** (\`npx tsx bench/step-cpu.ts\`, at commit ${commit}, load average ${load}): with **${cold100.entries} history
  entries, median ${ms(cold100.cpu, 50)} ms** (p90 ${ms(cold100.cpu, 90)} ms), against ${ms(cold0.cpu, 50)} ms for a step with an
  empty history — history read through postgres.js, one replay (the
  look-ahead continues it), one activity, fenced conclusion. That is what a
  Worker pays per step: the app is built per request, so no run stays in
  memory between steps. Where the follow-up lands in the same process (the
  local dispatcher, \`serveNode\`), the step continues the run kept in memory
  and costs ${ms(warm100.cpu, 50)} ms at ${warm100.entries} entries. Measured on Node ${process.versions.node.split(".")[0]} (V8, as in workerd)
  on a ${availableParallelism()}-vCPU machine.
`,
  );
}
await edda.close();
await database.close();
await cluster?.stop();
