/**
 * PGlite: Postgres compiled to WASM, in-process. The embedded default for local
 * development and `npm start` (data kept in a folder), and in-memory for tests.
 * One connection: statements and transactions are serialized.
 */
import { PGlite } from "@electric-sql/pglite";
import { drizzle } from "drizzle-orm/pglite";
import { countingLogger, type Database, type Db, type QueryStats } from "../database.ts";

export type { Database, Db, DriverName, QueryStats } from "../database.ts";

export interface PgliteOptions {
  /** Folder for the data; omit for an in-memory database. */
  dataDir?: string;
}

export async function createPgliteDatabase(opts: PgliteOptions = {}): Promise<Database> {
  const client = opts.dataDir ? new PGlite(opts.dataDir) : new PGlite();
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
