/**
 * The benchmark's Postgres: the tests' throwaway cluster (initdb into a temp
 * dir, durability off) or an existing server from DATABASE_URL. Every scenario
 * gets its own database on the same server, so scenarios cannot see each
 * other's rows but share one machine, one server and one run — the ratios
 * between them hold on a noisy machine. Shared with the chaos driver.
 */
import postgres from "postgres";
import { startPostgresCluster, type PostgresCluster } from "../../test/support/postgres-cluster.ts";

export interface BenchPostgres {
  /** Admin url (database `postgres`, or DATABASE_URL's database). */
  adminUrl: string;
  /** True when the server is the throwaway cluster started here. */
  throwaway: boolean;
  /** Drops (if present) and creates database `name`; returns its url. */
  createDatabase(name: string): Promise<string>;
  /** Server settings that matter for the figures. */
  settings(): Promise<Record<string, string>>;
  /**
   * Zero database `name`'s pg_stat_database counters. Backends report their
   * counts lazily (at the latest when they exit), so reset after the setup
   * connections have closed, and read `commits` after the measured pool closed.
   */
  resetStats(name: string): Promise<void>;
  /** Committed transactions in database `name` since the last reset. */
  commits(name: string): Promise<number>;
  stop(): Promise<void>;
}

const SETTINGS = ["server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "max_connections", "wal_level"];

/** `durable`: the throwaway cluster keeps Postgres's durable defaults (fsync, synchronous_commit on). */
export async function openBenchPostgres(databaseUrl = process.env.DATABASE_URL, opts: { durable?: boolean } = {}): Promise<BenchPostgres> {
  const cluster: PostgresCluster | null = databaseUrl ? null : await startPostgresCluster(opts);
  const adminUrl = databaseUrl ?? cluster!.url;
  const admin = postgres(adminUrl, { max: 2, onnotice: () => {} });
  return {
    adminUrl,
    throwaway: cluster !== null,
    async createDatabase(name) {
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`bad database name: ${name}`);
      await admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`;
      await admin`CREATE DATABASE ${admin(name)}`;
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      return url.toString();
    },
    async settings() {
      const out: Record<string, string> = {};
      for (const s of SETTINGS) {
        const [row] = await admin.unsafe<{ v: string }[]>(`SELECT current_setting('${s}') AS v`);
        out[s] = row?.v ?? "?";
      }
      return out;
    },
    async resetStats(name) {
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      const one = postgres(url.toString(), { max: 1, onnotice: () => {} });
      try {
        await one`SELECT pg_stat_reset()`;
      } finally {
        await one.end({ timeout: 5 });
      }
    },
    async commits(name) {
      const [row] = await admin<{ n: string }[]>`SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = ${name}`;
      return Number(row?.n ?? 0);
    },
    async stop() {
      await admin.end({ timeout: 5 }).catch(() => undefined);
      await cluster?.stop();
    },
  };
}
