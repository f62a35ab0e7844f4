/**
 * Ceiling: what the same Postgres commits with nothing but single-row INSERTs
 * in autocommit, through postgres.js at the engine's connection count. Every
 * engine step needs at least one commit, so this bounds steps/s from above.
 */
import postgres from "postgres";
import { cpuMeter } from "../lib/cpu.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { nowMs } from "../lib/stats.ts";

export interface CeilingResult {
  ceiling_commits_per_s: number;
  connections: number;
  seconds: number;
  node_cpu_ms_per_commit: number;
  pg_cpu_ms_per_commit: number | null;
}

export interface CeilingOptions {
  connections: number;
  seconds: number;
  /** Database name (one per variant). */
  name?: string;
  /** Maps the database url to the one the client uses (the latency proxy). */
  via?: (url: string) => string;
}

export async function runCeiling(pg: BenchPostgres, opts: CeilingOptions): Promise<CeilingResult> {
  const name = opts.name ?? "bench_ceiling";
  const url = await pg.createDatabase(name);
  const sql = postgres(opts.via ? opts.via(url) : url, { max: opts.connections, onnotice: () => {} });
  try {
    await sql`CREATE TABLE ceiling_rows (id bigserial PRIMARY KEY, worker int NOT NULL, payload text NOT NULL)`;
    const loop = async (worker: number, untilMs: number) => {
      let n = 0;
      while (nowMs() < untilMs) {
        await sql`INSERT INTO ceiling_rows (worker, payload) VALUES (${worker}, ${"x".repeat(64)})`;
        n++;
      }
      return n;
    };
    const workers = (untilMs: number) => Promise.all(Array.from({ length: opts.connections }, (_, w) => loop(w, untilMs)));
    await workers(nowMs() + 500); // warm-up: connections, prepared statement
    const cpu = cpuMeter(name);
    const t0 = nowMs();
    const counts = await workers(t0 + opts.seconds * 1000);
    const elapsed = (nowMs() - t0) / 1000;
    const total = counts.reduce((a, b) => a + b, 0);
    const usage = cpu.perUnit(total);
    return { ceiling_commits_per_s: total / elapsed, connections: opts.connections, seconds: elapsed, node_cpu_ms_per_commit: usage.node_ms, pg_cpu_ms_per_commit: usage.pg_ms };
  } finally {
    await sql.end({ timeout: 5 });
  }
}
