/**
 * PGlite: Postgres compiled to WASM, in-process. The embedded default for local
 * development and `npm start` (data kept in a folder), and in-memory for tests.
 * One connection: statements and transactions are serialized.
 */
import { PGlite } from "@electric-sql/pglite";
import { drizzle } from "drizzle-orm/pglite";
import { countingLogger, type Database, type Db, type QueryStats } from "../database.ts";
import { needsInitdb, saveTemplate, seedFromTemplate, templateFolder } from "./pglite-template.ts";

export type { Database, Db, DriverName, QueryStats } from "../database.ts";

export interface PgliteOptions {
  /** Folder for the data; omit for an in-memory database. */
  dataDir?: string;
  /** Postgres settings (`name=value`) after the defaults below, e.g. `shared_buffers=64MB`. */
  settings?: string[];
  /**
   * A cache folder for a pre-initialised data folder (pglite-template.ts): a
   * fresh `dataDir` is copied from it instead of running initdb, and the first
   * initdb on the machine leaves it there. Unset: initdb on every fresh folder.
   */
  templateCache?: string;
  /**
   * Start from this dump of a data directory (PGlite's `dumpDataDir()`)
   * instead of an empty cluster: no initdb, several times faster to open
   * (the test kit opens each kit's database from one migrated dump).
   */
  loadDataDir?: Blob;
}

/**
 * Sized for a laptop running one app, not for a server: PGlite's own default
 * of 128 MB shared buffers is WASM memory that is touched and never given
 * back, and with it initdb and each start take longer. Measured with
 * bench/startup.ts (BENCHMARKS.md): a restart's idle RSS ~300 → ~175 MiB.
 */
export const PGLITE_SETTINGS: readonly string[] = ["shared_buffers=16MB", "temp_buffers=2MB", "work_mem=2MB", "maintenance_work_mem=16MB", "wal_buffers=1MB"];

export async function createPgliteDatabase(opts: PgliteOptions = {}): Promise<Database> {
  const settings = { postgresqlconf: [...PGLITE_SETTINGS, ...(opts.settings ?? [])] };
  if (opts.dataDir && opts.templateCache) await seedDataDir(opts.dataDir, opts.templateCache, settings);
  const options = opts.loadDataDir ? { ...settings, loadDataDir: opts.loadDataDir } : settings;
  const client = opts.dataDir ? new PGlite(opts.dataDir, options) : new PGlite(options);
  await client.waitReady;
  const stats: QueryStats = { statements: 0 };
  const db = drizzle({ client, logger: countingLogger(stats) }) as unknown as Db;
  return {
    driver: "pglite",
    db,
    stats,
    concurrent: false,
    listen: async (channel, onPayload) => client.listen(channel, onPayload),
    close: () => client.close(),
  };
}

/**
 * A fresh data folder from the template; without one, initdb here, a clean
 * shut-down and a copy kept as the template (one restart more, once per
 * machine and PGlite version).
 */
async function seedDataDir(dataDir: string, cache: string, settings: { postgresqlconf: string[] }): Promise<void> {
  const template = templateFolder(cache);
  if (!template || !needsInitdb(dataDir) || seedFromTemplate(template, dataDir)) return;
  const first = new PGlite(dataDir, settings);
  await first.waitReady;
  await first.close();
  saveTemplate(dataDir, template);
}
