/**
 * Database clients for the edge adapters (Workers, Deno): postgres.js over TCP
 * or Neon's serverless driver over WebSockets, chosen by DATABASE_DRIVER. No
 * PGlite here — it is Node-only and must stay out of edge bundles — and no
 * migrations: deployed databases are migrated by `edda-edge migrate`.
 */
import type { Database } from "../storage/database.ts";
import { createNeonDatabase } from "../storage/drivers/neon-serverless.ts";
import { createPostgresJsDatabase } from "../storage/drivers/postgres-js.ts";
import { ConfigurationError, type EddaConfig } from "./env.ts";

export { ConfigurationError };

export interface ServerlessDatabaseOptions {
  /** Connection string that wins over DATABASE_URL (a Hyperdrive binding's). */
  connectionString?: string;
  /** Pool size (keep it small where clients live for one request). */
  max?: number;
  /**
   * The client lives for one request (Workers): postgres.js then sends
   * unnamed statements with their values written in, one round trip each,
   * instead of preparing statements its connection will not see again.
   */
  perRequest?: boolean;
}

export function openServerlessDatabase(config: EddaConfig, opts: ServerlessDatabaseOptions = {}): Database {
  const url = opts.connectionString ?? config.databaseUrl;
  if (!url) throw new ConfigurationError("DATABASE_URL is not set (nor a Hyperdrive binding)", "DATABASE_URL");
  if (config.driver === "neon-serverless") {
    return createNeonDatabase({ url, max: opts.max ?? 5, ...(config.neonWsProxy ? { wsProxy: config.neonWsProxy } : {}) });
  }
  return createPostgresJsDatabase({ url, max: opts.max ?? 5, prepare: !opts.perRequest });
}

