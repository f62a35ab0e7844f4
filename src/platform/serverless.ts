/**
 * Database clients for the edge adapters (Workers, Deno): postgres.js over TCP
 * or Neon's serverless driver over WebSockets, chosen by DATABASE_DRIVER among
 * the drivers the adapter was given. The drivers arrive as values
 * (`postgresJs`, `neonServerless`) instead of being imported here, so a
 * bundler keeps only those the entry imports: a Worker without Neon carries
 * none of Neon's driver. No PGlite here — it is Node-only and must stay out
 * of edge bundles — and no migrations: deployed databases are migrated by
 * `edda-edge migrate`.
 */
import type { Database, DatabaseDriver } from "../storage/database.ts";
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

/**
 * The driver DATABASE_DRIVER names among `drivers`, or the first when it is
 * unset; a name the adapter was not given fails loudly with the import that
 * adds it, instead of silently using another driver.
 */
export function chooseDriver(config: EddaConfig, drivers: readonly DatabaseDriver[]): DatabaseDriver {
  const chosen = config.driver ? drivers.find((d) => d.name === config.driver) : drivers[0];
  if (chosen) return chosen;
  const wanted = config.driver ?? "a driver";
  const name = config.driver === "neon-serverless" ? "neonServerless" : "postgresJs";
  throw new ConfigurationError(
    `DATABASE_DRIVER=${wanted}, but this app was given only ${drivers.map((d) => d.name).join(", ") || "no driver"}: import { ${name} } from "edda-edge/drivers/${wanted}" and pass it as the driver option`,
    "DATABASE_DRIVER",
  );
}

export function openServerlessDatabase(config: EddaConfig, drivers: readonly DatabaseDriver[], opts: ServerlessDatabaseOptions = {}): Database {
  const url = opts.connectionString ?? config.databaseUrl;
  if (!url) throw new ConfigurationError("DATABASE_URL is not set (nor a Hyperdrive binding)", "DATABASE_URL");
  return chooseDriver(config, drivers).open({ url, max: opts.max ?? 5, perRequest: opts.perRequest ?? false, wsProxy: config.neonWsProxy });
}
