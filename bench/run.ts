/**
 * `npm run bench [-- --quick] [-- --only=ceiling,local,...]`
 *
 * Every scenario in one run against one Postgres (a throwaway cluster, or
 * DATABASE_URL), so the ratios between them hold on a noisy machine. Prints a
 * table and the targets, writes bench/results/latest.json and
 * bench/results/steps-per-second.svg. Benchmarks, not tests: nothing here
 * asserts on timings; a scenario that breaks is reported and the run exits 1.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, platform, release } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openBenchPostgres, type BenchPostgres } from "./lib/postgres.ts";
import { createPostgresJsDatabase } from "../src/storage/drivers/postgres-js.ts";
import { median, round } from "./lib/stats.ts";
import { checkTargets, renderChart, renderTable, renderTargets, type Figures } from "./report.ts";
import { runCeiling } from "./scenarios/ceiling.ts";
import { runDbos } from "./scenarios/dbos.ts";
import { runEngineHttp } from "./scenarios/engine-http.ts";
import { runEngineLocal } from "./scenarios/engine-local.ts";
import { runEngineQueue } from "./scenarios/engine-queue.ts";
import { runFanout } from "./scenarios/fanout.ts";
import { runLatency } from "./scenarios/latency.ts";
import { runLatencyFresh } from "./scenarios/latency-fresh.ts";
import { runReplay } from "./scenarios/replay.ts";
import { runSweeper } from "./scenarios/sweeper.ts";
import { runPeers } from "./peers.ts";
import { peerVersions } from "./lib/versions.ts";
import { pipelineNonTx } from "./workflows.ts";

const args = process.argv.slice(2);
const quick = args.includes("--quick");
const only = args.find((a) => a.startsWith("--only="))?.slice(7).split(",");
const want = (s: string) => !only || only.includes(s);

/** The engine's pool; the ceiling runs at the same connection count. */
const POOL = 10;
const config = {
  mode: quick ? "quick" : "full",
  pool: POOL,
  localConcurrency: 10,
  workflows: 200,
  steps: 10,
  // Throughput scenarios run in passes (ceiling, local, http, DBOS, repeated); each figure is the median over passes.
  passes: quick ? 1 : 3,
  ceilingSeconds: quick ? 3 : 8,
  localRounds: quick ? 2 : 3,
  httpRounds: quick ? 1 : 2,
  dbosRounds: quick ? 2 : 3,
  httpServers: 2,
  queueRounds: quick ? 1 : 2,
  queueConsumers: 2,
  replay: { histories: [10, 100, 1000, 5000, 10_000], instances: quick ? 2 : 5, probes: quick ? 10 : 20 },
  sweeperTimers: 10_000,
  fanoutSubscribers: 1_000,
  // The peers on a durable Postgres (a second throwaway cluster, fsync on), loopback and 10 ms away (bench/peers.ts).
  peers: { passes: quick ? 1 : 3, workflows: 200, steps: 10, pool: POOL, rounds: quick ? 1 : 2, concurrency: 10, ceilingSeconds: quick ? 2 : 4, rttMs: 10 },
  // Postgres a region away: 10 ms round trips through a delaying TCP proxy, 100 concurrent 10-step pipelines.
  latency: { rttMs: 10, workflows: 100, steps: 10, pool: POOL },
  // The same 10 ms away, every step on a client of its own (a Workers request, a queue-consumer invocation).
  latencyFresh: { rttMs: 10, steps: quick ? 6 : 12 },
};

const versions = peerVersions();

const resultsDir = join(dirname(fileURLToPath(import.meta.url)), "results");
const figures: Figures = {};
const errors: Record<string, string> = {};
const samples: Record<string, number[]> = {};

async function scenario(name: string, run: () => Promise<object>): Promise<void> {
  if (!want(name)) return;
  const t0 = Date.now();
  process.stderr.write(`bench: ${name}…`);
  try {
    const r = await run();
    for (const [k, v] of Object.entries(r)) if (typeof v === "number") (samples[k] ??= []).push(v);
    const missing = Object.entries(r).filter(([, v]) => v === null).map(([k]) => k);
    if (missing.length) process.stderr.write(` (no value: ${missing.join(", ")})`);
    process.stderr.write(` ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  } catch (err) {
    process.stderr.write(` FAILED\n`);
    console.error(err);
    errors[name] = err instanceof Error ? err.message : String(err);
  }
}

function gitCommit(): string | null {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return null;
  }
}

async function main(pg: BenchPostgres): Promise<void> {
  const startedAt = new Date().toISOString();
  const load0 = loadavg();
  for (let pass = 0; pass < config.passes; pass++) {
    await scenario("ceiling", () => runCeiling(pg, { connections: POOL, seconds: config.ceilingSeconds }));
    const local = { workflows: config.workflows, steps: config.steps, rounds: config.localRounds, pool: POOL, concurrency: config.localConcurrency };
    await scenario("local", async () => {
      const r = await runEngineLocal(pg, local);
      return { local_steps_per_s: r.steps_per_s, step_p50_ms: r.step_p50_ms, step_p99_ms: r.step_p99_ms, statements_per_step: r.statements_per_step, commits_per_step: r.commits_per_step, node_cpu_ms_per_step: r.node_cpu_ms_per_step, pg_cpu_ms_per_step: r.pg_cpu_ms_per_step };
    });
    // Variants that size two costs and savings of the shipped path (see BENCHMARKS.md); not headline figures.
    await scenario("local-nontx", async () => {
      const r = await runEngineLocal(pg, { ...local, workflow: pipelineNonTx, name: "bench_engine_local_nontx" });
      return { local_nontx_steps_per_s: r.steps_per_s, nontx_commits_per_step: r.commits_per_step };
    });
    // Group commit off: each step's conclusion a statement of its own (what group commit saves).
    await scenario("local-ungrouped", async () => {
      const r = await runEngineLocal(pg, { ...local, groupCommit: false, name: "bench_engine_local_ungrouped" });
      return {
        local_ungrouped_steps_per_s: r.steps_per_s,
        ungrouped_statements_per_step: r.statements_per_step,
        ungrouped_node_cpu_ms_per_step: r.node_cpu_ms_per_step,
        ungrouped_pg_cpu_ms_per_step: r.pg_cpu_ms_per_step,
      };
    });
    // `prepare: false`, the setting for transaction-mode poolers (PgBouncer, Hyperdrive).
    const unprepared = (url: string, max: number) => createPostgresJsDatabase({ url, max, prepare: false });
    await scenario("local-unprepared", async () => {
      const r = await runEngineLocal(pg, { ...local, openDatabase: unprepared, name: "bench_engine_local_unprepared" });
      return { local_unprepared_steps_per_s: r.steps_per_s, unprepared_pg_cpu_ms_per_step: r.pg_cpu_ms_per_step };
    });
    await scenario("http", () => runEngineHttp(pg, { servers: config.httpServers, workflows: config.workflows, steps: config.steps, rounds: config.httpRounds }));
    await scenario("queue", () => runEngineQueue(pg, { workflows: config.workflows, steps: config.steps, rounds: config.queueRounds, consumers: config.queueConsumers }));
    await scenario("dbos", () => runDbos(pg, { workflows: config.workflows, steps: config.steps, rounds: config.dbosRounds, pool: POOL }));
  }
  await scenario("replay", () => runReplay(pg, config.replay));
  await scenario("sweeper", () => runSweeper(pg, { timers: config.sweeperTimers, pool: POOL, concurrency: config.localConcurrency }));
  await scenario("latency", () => runLatency(pg, config.latency));
  await scenario("latency-fresh", () => runLatencyFresh(pg, config.latencyFresh));
  await scenario("fanout", () => runFanout(pg, { subscribers: config.fanoutSubscribers, pool: POOL, concurrency: config.localConcurrency }));
  await scenario("peers", async () => {
    const durable = await openBenchPostgres(process.env.DATABASE_URL, { durable: true });
    try {
      return await runPeers(durable, config.peers, (line) => process.stderr.write(`\n  ${line}`));
    } finally {
      await durable.stop();
    }
  });

  for (const [k, v] of Object.entries(samples)) figures[k] = round(median(v), k.endsWith("_per_s") ? 0 : 3);
  for (const key of ["ceiling_commits_per_s", "local_steps_per_s", "http_steps_per_s", "dbos_steps_per_s", "statements_per_step", "step_p50_ms", "step_p99_ms", "replay_ms_h10", "replay_ms_h1000", "replay_cold_ms_h10", "replay_cold_ms_h1000", "sweep_10k_timers_s", "fanout_1k_s"]) {
    figures[key] ??= null;
  }

  const table = renderTable(figures, [
    ["Postgres ceiling (single-row INSERT commits)", "ceiling_commits_per_s", "commits/s"],
    ["Engine, local dispatcher", "local_steps_per_s", "steps/s"],
    ["Engine, http dispatcher (2 Node servers)", "http_steps_per_s", "steps/s"],
    [`DBOS Transact ${versions.dbos}`, "dbos_steps_per_s", "steps/s"],
    ["  variant: non-transactional activities", "local_nontx_steps_per_s", "steps/s"],
    ["  variant: unprepared statements (prepare: false)", "local_unprepared_steps_per_s", "steps/s"],
    ["Step latency p50 (local)", "step_p50_ms", "ms"],
    ["Step latency p99 (local)", "step_p99_ms", "ms"],
    ["Statements per step (local)", "statements_per_step", ""],
    ["Commits per step (local)", "commits_per_step", ""],
    ["Statements per step (http)", "http_statements_per_step", ""],
    ["CPU per step, engine process (http: both servers)", "http_cpu_ms_per_step", "ms"],
    ["Engine behind a queue (Workers adapter, batches of ≤ 100)", "queue_steps_per_s", "steps/s"],
    ["  CPU per step, engine process (queue)", "queue_cpu_ms_per_step", "ms"],
    ["  messages per consumer batch", "queue_messages_per_batch", ""],
    ["  steps per consumer invocation (messages and chained steps)", "queue_steps_per_batch", ""],
    ["  invocations per step (start requests and batches)", "queue_invocations_per_step", ""],
    ["  connections accepted per step (pg_stat_database.sessions)", "queue_connections_per_step", ""],
    ["  a per-request client's connect + first statement + close", "queue_connect_ms", "ms"],
    ["  its CPU, engine process", "queue_connect_cpu_ms", "ms"],
    ["DBOS commits per step", "dbos_commits_per_step", ""],
    ["CPU per step, engine process (local)", "node_cpu_ms_per_step", "ms"],
    ["CPU per step, Postgres backends (local)", "pg_cpu_ms_per_step", "ms"],
    ["  variant: unprepared statements", "unprepared_pg_cpu_ms_per_step", "ms"],
    ["CPU per step, DBOS process", "dbos_node_cpu_ms_per_step", "ms"],
    ["CPU per step, Postgres backends (DBOS)", "dbos_pg_cpu_ms_per_step", "ms"],
    ["CPU per commit, client (ceiling)", "node_cpu_ms_per_commit", "ms"],
    ["CPU per commit, Postgres backends (ceiling)", "pg_cpu_ms_per_commit", "ms"],
    ["Warm step (run kept in memory), 10 history entries", "replay_ms_h10", "ms"],
    ["Warm step, 100 history entries", "replay_ms_h100", "ms"],
    ["Warm step, 1,000 history entries", "replay_ms_h1000", "ms"],
    ["Cold step (lease, history read, replay), 10 entries", "replay_cold_ms_h10", "ms"],
    ["Cold step, 100 history entries", "replay_cold_ms_h100", "ms"],
    ["Cold step, 1,000 history entries", "replay_cold_ms_h1000", "ms"],
    ["Cold step, 5,000 history entries", "replay_cold_ms_h5000", "ms"],
    ["Cold step, 10,000 history entries", "replay_cold_ms_h10000", "ms"],
    ["  this process's CPU, cold step at 5,000 entries", "replay_cold_cpu_ms_h5000", "ms"],
    ["  cold step cost per history entry (slope 10 → 10,000)", "replay_cold_us_per_entry", "µs"],
    ["  of it this process's CPU (slope 10 → 10,000)", "replay_cold_cpu_us_per_entry", "µs"],
    ["10,000 expired timers → all resumed", "sweep_10k_timers_s", "s"],
    ["  of which sweep() firing them", "sweep_fire_s", "s"],
    ["1 broadcast → 1,000 subscribers received", "fanout_1k_s", "s"],
    ["Postgres 10 ms away: round trips per cold step", "latency_cold_round_trips_per_step", ""],
    ["  cold step latency", "latency_cold_step_ms", "ms"],
    ["  round trips per warm step (run in memory)", "latency_warm_round_trips_per_step", ""],
    ["  warm step latency", "latency_warm_step_ms", "ms"],
    ["  100 × 10-step pipelines, local dispatcher", "latency_local_steps_per_s", "steps/s"],
    ["  step latency p50 / p99 (local)", "latency_local_step_p50_ms", "ms"],
    ["", "latency_local_step_p99_ms", "ms"],
    ["Postgres 10 ms away, a client per step (Workers): round trips, trust", "latency_fresh_round_trips_per_step", ""],
    ["  step latency, trust", "latency_fresh_step_ms", "ms"],
    ["  over its round trips' time (step ms / (round trips × RTT))", "latency_fresh_rtt_ratio", "×"],
    ["  round trips, SCRAM", "latency_fresh_scram_round_trips_per_step", ""],
    ["  step latency, SCRAM", "latency_fresh_scram_step_ms", "ms"],
    ["  round trips, Neon over WebSocket, pipelineConnect", "latency_fresh_neon_pipelined_round_trips_per_step", ""],
    ["  pooled cold step of the same run: round trips", "latency_pooled_round_trips_per_step", ""],
    ["  pooled cold step latency", "latency_pooled_step_ms", "ms"],
    ["  of which delivery (last subscriber dispatched)", "fanout_delivered_s", "s"],
    ["Durable Postgres (fsync on), loopback: INSERT ceiling", "peers_ceiling_commits_per_s", "commits/s"],
    ["  Edda Edge, local dispatcher", "peers_local_steps_per_s", "steps/s"],
    [`  DBOS Transact ${versions.dbos}`, "peers_dbos_steps_per_s", "steps/s"],
    [`  Absurd ${versions.absurd}`, "peers_absurd_steps_per_s", "steps/s"],
    [`  graphile-worker ${versions.graphile}`, "peers_graphile_steps_per_s", "steps/s"],
    ["Durable Postgres 10 ms away: Edda Edge, local", "peers_rtt_local_steps_per_s", "steps/s"],
    ["  DBOS Transact", "peers_rtt_dbos_steps_per_s", "steps/s"],
    ["  Absurd", "peers_rtt_absurd_steps_per_s", "steps/s"],
    ["  graphile-worker", "peers_rtt_graphile_steps_per_s", "steps/s"],
  ]);
  const targets = checkTargets(figures);
  const machine = { cpus: cpus().length, cpu_model: cpus()[0]?.model ?? "?", node: process.version, os: `${platform()} ${release()}`, loadavg_start: load0, loadavg_end: loadavg() };
  const postgres: Record<string, string | boolean> = { ...(await pg.settings()), throwaway_cluster: pg.throwaway };

  console.log(`\nEdda Edge benchmark — ${config.mode} run, ${startedAt}, commit ${gitCommit() ?? "?"}`);
  console.log(`machine: ${machine.cpus} × ${machine.cpu_model}, Node ${machine.node}, load ${load0.map((l) => l.toFixed(1)).join("/")}`);
  console.log(`postgres: ${postgres.server_version}, fsync=${postgres.fsync}, synchronous_commit=${postgres.synchronous_commit}\n`);
  console.log(table);
  console.log(`\nTargets (same run):\n${renderTargets(targets)}`);
  for (const [name, msg] of Object.entries(errors)) console.log(`\nscenario ${name} FAILED: ${msg}`);

  mkdirSync(resultsDir, { recursive: true });
  const doc = { ...figures, meta: { started_at: startedAt, commit: gitCommit(), config, machine, postgres, samples }, targets, errors };
  writeFileSync(join(resultsDir, "latest.json"), JSON.stringify(doc, null, 2) + "\n");
  const chart = renderChart(
    "Durable steps per second — 10-step pipelines, 200 concurrent",
    `${config.mode} run ${startedAt.slice(0, 10)} · ${machine.cpus} cores · Node ${machine.node} · Postgres ${String(postgres.server_version).split(" ")[0]} (fsync=${postgres.fsync}) · pool ${POOL}`,
    [
      { label: "Edda Edge, local", value: figures.local_steps_per_s as number | null, color: "#2f6fdb" },
      { label: "Edda Edge, http (2 servers)", value: figures.http_steps_per_s as number | null, color: "#6b9be8" },
      { label: "DBOS Transact", value: figures.dbos_steps_per_s as number | null, color: "#e07b39" },
      { label: "Postgres ceiling (commits)", value: figures.ceiling_commits_per_s as number | null, color: "#9a9a9a" },
    ],
  );
  writeFileSync(join(resultsDir, "steps-per-second.svg"), chart);
  console.log(`\nwrote ${join("bench", "results", "latest.json")} and ${join("bench", "results", "steps-per-second.svg")}`);
}

// DBOS's pg pool warns about queued client.query() calls; not ours to fix, and it hides the table.
process.noDeprecation = true;
const pg = await openBenchPostgres();
let stopping = false;
const stop = async (code: number) => {
  if (stopping) return;
  stopping = true;
  await pg.stop().catch(() => undefined);
  process.exit(code);
};
process.once("SIGINT", () => void stop(130));
process.once("SIGTERM", () => void stop(143));
try {
  await main(pg);
} catch (err) {
  console.error(err);
  errors.run = String(err);
}
await stop(Object.keys(errors).length ? 1 : 0);
