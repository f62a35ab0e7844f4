// Per-file isolation: each test file creates its own fresh database on the
// run's server (see test/global-setup.ts) and may point Neon at the local proxy.
import { randomBytes } from "node:crypto";
import { neonConfig } from "@neondatabase/serverless";
import { inject } from "vitest";
import { configureNeonForLocalProxy } from "./neon-proxy.ts";
import { createDatabase } from "./postgres-cluster.ts";

/** Creates a uniquely named empty database and returns its url. */
export async function freshDatabase(prefix: string): Promise<string> {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9_]/g, "_").slice(0, 30);
  const name = `t_${clean}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
  return createDatabase(inject("TEST_DATABASE_URL"), name);
}

/** Configures the global `neonConfig` of this test file's process for the local proxy. */
export function useLocalNeonProxy(): void {
  configureNeonForLocalProxy(neonConfig, inject("TEST_NEON_PROXY_PORT"));
}
