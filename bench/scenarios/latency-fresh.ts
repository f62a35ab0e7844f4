/**
 * What a Worker pays per step: every step on a client opened for it (I/O
 * objects do not outlive a Workers request, nor a queue-consumer invocation),
 * against a Postgres one round trip of `rttMs` away (bench/lib/latency-proxy.ts).
 * Per variant — driver, authentication, statement mode, workflow — the median
 * round trips and latency of a cold step (lease + history read, replay,
 * conclusion), start-up included, close excluded (a Worker closes in
 * `waitUntil`, after its response). The pooled cold step of the same settings
 * is measured alongside, for the ratio.
 *
 * Each variant's round trips are written with their messages to
 * bench/results/latency-fresh.json (what BENCHMARKS.md explains).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import type { Workflow } from "../../src/core/definitions.ts";
import { Engine } from "../../src/engine/engine.ts";
import type { Database } from "../../src/storage/database.ts";
import { createNeonDatabase } from "../../src/storage/drivers/neon-serverless.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import { startNeonWsProxy } from "../../test/support/neon-proxy.ts";
import { addPasswordRoles, type PasswordRole } from "../lib/auth-roles.ts";
import { migrateDatabase, RecordingDispatcher } from "../lib/engine.ts";
import { startLatencyProxy, type Flight, type LatencyProxy } from "../lib/latency-proxy.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { median, sleepMs } from "../lib/stats.ts";
import { pipeline, pipelineNonTx } from "../workflows.ts";

export interface LatencyFreshOptions {
  rttMs: number;
  /** Steps measured per variant (each on its own client). */
  steps: number;
}

type Auth = "trust" | "scram" | "cleartext";

interface Variant {
  /** Figure key infix: `latency_fresh${key}_round_trips_per_step`. */
  key: string;
  label: string;
  driver: "postgres-js" | "neon";
  auth: Auth;
  workflow: Workflow;
  /** Opens one client (a Worker's per-request one) for `url`. */
  open: (url: string) => Database;
}

interface Measured {
  trips: number | null;
  ms: number | null;
  /** The round trips of one representative step. */
  flights: Flight[];
}

const resultsFile = join(dirname(fileURLToPath(import.meta.url)), "..", "results", "latency-fresh.json");

export async function runLatencyFresh(pg: BenchPostgres, opts: LatencyFreshOptions): Promise<Record<string, number | null>> {
  const url = await pg.createDatabase("bench_latency_fresh");
  await migrateDatabase(url);
  // Password start-ups need roles and pg_hba lines: only on the throwaway cluster.
  const roles = pg.throwaway ? await addPasswordRoles(pg.adminUrl, ["scram-sha-256", "password"]) : [];
  const role = (m: PasswordRole["method"]) => roles.find((r) => r.method === m);
  const credentials = (auth: Auth, u: string): string | null => {
    if (auth === "trust") return u;
    const r = role(auth === "scram" ? "scram-sha-256" : "password");
    return r ? r.urlFor(u) : null;
  };

  const tcp = await startLatencyProxy(url, opts.rttMs, { trace: "postgres" });
  const ws = await startNeonWsProxy();
  const wsLatency = await startLatencyProxy(`postgres://ws@127.0.0.1:${ws.port}/`, opts.rttMs, { trace: "websocket" });
  const wsProxy = `127.0.0.1:${new URL(wsLatency.url).port}`;
  // The Neon driver reaches Postgres through the WebSocket proxy; the delay sits between driver and proxy.
  // lazyTransactions: false is drizzle's BEGIN … COMMIT, what the driver did before neon-lazy-tx.ts.
  const neon = (u: string, pipelineConnect: "password" | false = false, lazyTransactions = true) =>
    createNeonDatabase({ url: u, max: 5, wsProxy, webSocketConstructor: WebSocket, pipelineConnect, lazyTransactions });
  // What the Workers adapter opens per request (src/platform/serverless.ts).
  const workerPg = (u: string) => createPostgresJsDatabase({ url: u, max: 5, prepare: false });

  const variants: Variant[] = [
    { key: "", label: "postgres.js, trust, per-request settings", driver: "postgres-js", auth: "trust", workflow: pipeline, open: workerPg },
    { key: "_scram", label: "postgres.js, SCRAM", driver: "postgres-js", auth: "scram", workflow: pipeline, open: workerPg },
    { key: "_prepared", label: "postgres.js, trust, named prepared statements (the pooled default)", driver: "postgres-js", auth: "trust", workflow: pipeline, open: (u) => createPostgresJsDatabase({ url: u, max: 5 }) },
    { key: "_nontx", label: "postgres.js, trust, non-transactional activity (conclusion alone)", driver: "postgres-js", auth: "trust", workflow: pipelineNonTx, open: workerPg },
    { key: "_neon", label: "Neon over WebSocket, trust", driver: "neon", auth: "trust", workflow: pipeline, open: (u) => neon(u) },
    { key: "_neon_scram", label: "Neon over WebSocket, SCRAM", driver: "neon", auth: "scram", workflow: pipeline, open: (u) => neon(u) },
    { key: "_neon_pipelined", label: "Neon over WebSocket, cleartext password + pipelineConnect (Neon's proxy)", driver: "neon", auth: "cleartext", workflow: pipeline, open: (u) => neon(u, "password") },
    { key: "_neon_envelope", label: "Neon over WebSocket, trust, BEGIN … COMMIT (lazyTransactions: false)", driver: "neon", auth: "trust", workflow: pipeline, open: (u) => neon(u, false, false) },
    { key: "_neon_pipelined_envelope", label: "Neon over WebSocket, cleartext password + pipelineConnect, BEGIN … COMMIT (lazyTransactions: false)", driver: "neon", auth: "cleartext", workflow: pipeline, open: (u) => neon(u, "password", false) },
  ];

  const out: Record<string, number | null> = { latency_fresh_rtt_ms: opts.rttMs };
  const startedAt = new Date().toISOString();
  const load0 = loadavg();
  const report: Record<string, unknown> = {};
  try {
    for (const v of variants) {
      const u = credentials(v.auth, v.driver === "neon" ? url : tcp.url);
      const m = u ? await measureFresh(v, u, v.driver === "neon" ? wsLatency : tcp, url, opts.steps, opts.rttMs) : { trips: null, ms: null, flights: [] };
      out[`latency_fresh${v.key}_round_trips_per_step`] = m.trips;
      out[`latency_fresh${v.key}_step_ms`] = m.ms;
      // The step's latency over the time its round trips alone take (issue 36, item 4: ≤ 1.3 for trust).
      out[`latency_fresh${v.key}_rtt_ratio`] = m.ms !== null && m.trips ? Math.round((m.ms / (m.trips * opts.rttMs)) * 1000) / 1000 : null;
      report[v.key || "_default"] = { label: v.label, round_trips: m.trips, step_ms: m.ms, flights: m.flights.map((f) => f.messages.join(" ")), flight_ms: m.flights.map((f) => f.ms) };
    }
    // The same step on a pooled client whose connection is open (what a long-lived process pays).
    const pooled = await measurePooled(variants[2]!, tcp, url, opts.steps);
    out.latency_pooled_round_trips_per_step = pooled.trips;
    out.latency_pooled_step_ms = pooled.ms;
    report._pooled = { label: "postgres.js, pooled client, connection open, named prepared statements (the latency scenario's cold step)", round_trips: pooled.trips, step_ms: pooled.ms, flights: pooled.flights.map((f) => f.messages.join(" ")), flight_ms: pooled.flights.map((f) => f.ms) };
  } finally {
    await wsLatency.stop();
    await ws.stop();
    await tcp.stop();
  }
  mkdirSync(dirname(resultsFile), { recursive: true });
  const meta = { started_at: startedAt, commit: gitCommit(), steps_per_variant: opts.steps, loadavg_start: load0, loadavg_end: loadavg() };
  writeFileSync(resultsFile, JSON.stringify({ rtt_ms: opts.rttMs, meta, variants: report }, null, 2) + "\n");
  return out;
}

/** A `steps + 1`-step run started over a direct connection, so the measured steps all find a handed lease. */
async function startRun(v: Variant, directUrl: string, steps: number, instanceId: string): Promise<RecordingDispatcher> {
  const held = new RecordingDispatcher();
  const setup = createPostgresJsDatabase({ url: directUrl, max: 1 });
  try {
    await new Engine({ storage: createStorage(setup), workflows: [v.workflow], dispatcher: held }).start(v.workflow, { steps: steps + 1 }, { instanceId });
  } finally {
    await setup.close();
  }
  return held;
}

async function measureFresh(v: Variant, url: string, proxy: LatencyProxy, directUrl: string, steps: number, rttMs: number): Promise<Measured> {
  const instanceId = `fresh${v.key || "_default"}`;
  const held = await startRun(v, directUrl, steps, instanceId);
  const trips: number[] = [];
  const ms: number[] = [];
  let flights: Flight[] = [];
  for (let i = 0; i < steps; i++) {
    const req = held.take(instanceId);
    const db = v.open(url);
    try {
      proxy.reset();
      const before = proxy.connections();
      const t0 = performance.now();
      const r = await new Engine({ storage: createStorage(db), workflows: [v.workflow], dispatcher: held }).runStep(req);
      ms.push(performance.now() - t0);
      // Only this step's connections: the previous client's goodbye may still be crossing the proxy.
      const own = proxy.flights().filter((f) => f.connection > before);
      trips.push(own.length);
      if (r.status !== "concluded") throw new Error(`${v.label}: step ${i} ${r.status}`);
      if (i === Math.floor(steps / 2)) flights = own;
    } finally {
      await db.close();
      await sleepMs(3 * rttMs);
    }
  }
  return { trips: median(trips), ms: median(ms), flights };
}

async function measurePooled(v: Variant, proxy: LatencyProxy, directUrl: string, steps: number): Promise<Measured> {
  const instanceId = "pooled";
  const held = await startRun(v, directUrl, steps + 1, instanceId);
  const db = v.open(proxy.url);
  const trips: number[] = [];
  const ms: number[] = [];
  let flights: Flight[] = [];
  try {
    for (let i = 0; i <= steps; i++) {
      const req = held.take(instanceId);
      proxy.reset();
      const t0 = performance.now();
      // A fresh engine: no run in memory, the history is read and replayed.
      await new Engine({ storage: createStorage(db), workflows: [v.workflow], dispatcher: held }).runStep(req);
      // The first step opens the connection.
      if (i === 0) continue;
      ms.push(performance.now() - t0);
      trips.push(proxy.roundTrips());
      if (i === Math.floor(steps / 2)) flights = [...proxy.flights()];
    }
  } finally {
    await db.close();
  }
  return { trips: median(trips), ms: median(ms), flights };
}

function gitCommit(): string | null {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return null;
  }
}
