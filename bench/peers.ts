/**
 * The engine beside its peers on one durable Postgres (fsync and
 * synchronous_commit on: every commit waits for its WAL flush), in one run:
 * the single-row INSERT ceiling, Edda Edge's local dispatcher, DBOS Transact,
 * Absurd and graphile-worker, each running `workflows` concurrent
 * `steps`-step pipelines on a pool of `pool` connections. Loopback figures are
 * medians over `passes` passes, the order rotating each pass so that drift on
 * a shared machine does not always favour the same peer. Then the same
 * workload once more through the 10 ms latency proxy, which counts round
 * trips: per step of the concurrent run, and per step of one pipeline alone.
 * Edda's cold and warm step (bench/scenarios/latency.ts) are measured through
 * the proxy as well. CPU per step comes from the loopback runs (the proxy runs
 * in this process and would count as the client's CPU).
 *
 * Writes bench/results/peers.json; `npx tsx bench/peers-report.ts` turns it
 * into the table in BENCHMARKS.md.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createPostgresJsDatabase } from "../src/storage/drivers/postgres-js.ts";
import { startLatencyProxy } from "./lib/latency-proxy.ts";
import type { BenchPostgres } from "./lib/postgres.ts";
import { median, percentile, round } from "./lib/stats.ts";
import { peerVersions } from "./lib/versions.ts";
import { runAbsurd } from "./scenarios/absurd.ts";
import { runCeiling } from "./scenarios/ceiling.ts";
import { runDbos } from "./scenarios/dbos.ts";
import { runEngineLocal } from "./scenarios/engine-local.ts";
import { runGraphile } from "./scenarios/graphile.ts";
import { runLatency } from "./scenarios/latency.ts";
import { pipelineNonTx } from "./workflows.ts";

export interface PeersConfig {
  passes: number;
  workflows: number;
  steps: number;
  pool: number;
  /** Measured rounds per peer and pass (each after a 20-pipeline warm-up). */
  rounds: number;
  /** Edda's local dispatcher concurrency. */
  concurrency: number;
  ceilingSeconds: number;
  rttMs: number;
}

type Row = Record<string, number | null>;
type Peer = "ceiling" | "local" | "dbos" | "absurd" | "graphile";
const PEERS: Peer[] = ["ceiling", "local", "dbos", "absurd", "graphile"];

interface Link {
  via?: (url: string) => string;
  roundTrips?: () => number;
}

/** One peer's figures under one key prefix; `workflows`/`rounds` override the config (the one-pipeline runs). */
async function runPeer(pg: BenchPostgres, peer: Peer, cfg: PeersConfig, link: Link, tag: string, size?: { workflows: number; rounds: number }): Promise<Row> {
  const w = { workflows: size?.workflows ?? cfg.workflows, steps: cfg.steps, rounds: size?.rounds ?? cfg.rounds, pool: cfg.pool };
  const name = `bench_peers_${peer}_${tag}`;
  switch (peer) {
    case "ceiling": {
      const r = await runCeiling(pg, { connections: cfg.pool, seconds: cfg.ceilingSeconds, name, ...(link.via ? { via: link.via } : {}) });
      return { commits_per_s: r.ceiling_commits_per_s, node_cpu_ms_per_step: r.node_cpu_ms_per_commit, pg_cpu_ms_per_step: r.pg_cpu_ms_per_commit };
    }
    case "local": {
      const r = await runEngineLocal(pg, {
        ...w,
        concurrency: cfg.concurrency,
        name,
        ...(link.via ? { openDatabase: (url: string, max: number) => createPostgresJsDatabase({ url: link.via!(url), max }) } : {}),
        ...(link.roundTrips ? { roundTrips: link.roundTrips } : {}),
      });
      return {
        steps_per_s: r.steps_per_s,
        node_cpu_ms_per_step: r.node_cpu_ms_per_step,
        pg_cpu_ms_per_step: r.pg_cpu_ms_per_step,
        round_trips_per_step: r.round_trips_per_step,
        step_round_trips_per_step: r.step_round_trips_per_step,
        start_round_trips: r.start_round_trips,
        step_p50_ms: r.step_p50_ms,
      };
    }
    case "dbos": {
      const r = await runDbos(pg, { ...w, name, ...link });
      return { steps_per_s: r.dbos_steps_per_s, node_cpu_ms_per_step: r.dbos_node_cpu_ms_per_step, pg_cpu_ms_per_step: r.dbos_pg_cpu_ms_per_step, round_trips_per_step: r.dbos_round_trips_per_step };
    }
    case "absurd":
    case "graphile": {
      const r = await (peer === "absurd" ? runAbsurd : runGraphile)(pg, { ...w, name, ...link });
      return { steps_per_s: r.steps_per_s, node_cpu_ms_per_step: r.node_cpu_ms_per_step, pg_cpu_ms_per_step: r.pg_cpu_ms_per_step, round_trips_per_step: r.round_trips_per_step };
    }
  }
}

export async function runPeers(pg: BenchPostgres, cfg: PeersConfig, log: (line: string) => void = () => {}): Promise<Row> {
  const startedAt = new Date().toISOString();
  const load0 = loadavg();
  const samples: Record<string, number[]> = {};
  const put = (prefix: string, row: Row) => {
    for (const [k, v] of Object.entries(row)) if (typeof v === "number") (samples[`${prefix}_${k}`] ??= []).push(v);
  };

  for (let pass = 0; pass < cfg.passes; pass++) {
    const order = [...PEERS.slice(pass % PEERS.length), ...PEERS.slice(0, pass % PEERS.length)];
    for (const peer of order) {
      const t0 = Date.now();
      put(`peers_${peer}`, await runPeer(pg, peer, cfg, {}, "loop"));
      log(`peers: pass ${pass + 1} ${peer} ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
  }

  // A region away: one pass (a 10 ms round trip makes every run long), the same order each time.
  const proxy = await startLatencyProxy(pg.adminUrl, cfg.rttMs, { timing: true });
  const host = new URL(proxy.url).host;
  const link: Link = { via: (url) => Object.assign(new URL(url), { host }).toString(), roundTrips: proxy.roundTrips };
  try {
    for (const peer of PEERS) {
      const t0 = Date.now();
      const flights0 = proxy.flights().length;
      put(`peers_rtt_${peer}`, await runPeer(pg, peer, cfg, link, "rtt"));
      // What a round trip itself took (the delay plus the server's time), beside the step latency that contains it.
      const ms = proxy.flights().slice(flights0).flatMap((f) => (f.ms === null ? [] : [f.ms]));
      put(`peers_rtt_${peer}`, { round_trip_p50_ms: percentile(ms, 50) });
      // One pipeline alone: the round trips a step costs without concurrency to amortize anything (its start included).
      if (peer !== "ceiling") {
        const alone = await runPeer(pg, peer, cfg, link, "alone", { workflows: 1, rounds: 1 });
        put(`peers_rtt_${peer}_alone`, { round_trips_per_step: alone.round_trips_per_step ?? null, step_round_trips_per_step: alone.step_round_trips_per_step ?? null, start_round_trips: alone.start_round_trips ?? null });
      }
      log(`peers: 10 ms RTT ${peer} ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
    // Edda's warm non-transactional step (what item 1 of the step protocol makes one round trip).
    const nontx = await runEngineLocal(pg, {
      workflows: 1,
      steps: cfg.steps,
      rounds: 1,
      pool: cfg.pool,
      concurrency: cfg.concurrency,
      workflow: pipelineNonTx,
      name: "bench_peers_local_nontx_alone",
      openDatabase: (url, max) => createPostgresJsDatabase({ url: link.via!(url), max }),
      roundTrips: proxy.roundTrips,
    });
    put("peers_rtt_local_nontx_alone", { round_trips_per_step: nontx.round_trips_per_step, step_round_trips_per_step: nontx.step_round_trips_per_step, start_round_trips: nontx.start_round_trips });
  } finally {
    await proxy.stop();
  }
  // Edda's cold step (fresh engine per step, as on Workers) and warm step, through its own proxy.
  const t0 = Date.now();
  const lat = await runLatency(pg, { rttMs: cfg.rttMs, workflows: 20, steps: cfg.steps, pool: cfg.pool });
  put("peers_rtt_local", { cold_round_trips_per_step: lat.latency_cold_round_trips_per_step, warm_round_trips_per_step: lat.latency_warm_round_trips_per_step, cold_step_ms: lat.latency_cold_step_ms, warm_step_ms: lat.latency_warm_step_ms });
  log(`peers: 10 ms RTT cold/warm ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const figures: Row = {};
  for (const [k, v] of Object.entries(samples)) figures[k] = round(median(v), k.endsWith("_per_s") ? 0 : 3);
  const settings = await pg.settings();
  const doc = { ...figures, meta: { started_at: startedAt, commit: gitCommit(), config: cfg, versions: peerVersions(), loadavg_start: load0, loadavg_end: loadavg(), postgres: settings, throwaway_cluster: pg.throwaway, samples } };
  const dir = join(dirname(fileURLToPath(import.meta.url)), "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "peers.json"), JSON.stringify(doc, null, 2) + "\n");
  return figures;
}

function gitCommit(): string | null {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return null;
  }
}
