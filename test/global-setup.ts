// Vitest globalSetup of the storage, engine and runtime tiers (vitest.config.ts;
// the unit tier has none): one Postgres server and one Neon WebSocket proxy for the
// whole run, handed to tests via provide/inject (and process.env for any child
// processes tests spawn). DATABASE_URL_TEST points at an existing server instead.
import type { TestProject } from "vitest/node";
import { startNeonWsProxy } from "./support/neon-proxy.ts";
import { startPostgresCluster } from "./support/postgres-cluster.ts";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env.DATABASE_URL_TEST;
  const cluster = external ? undefined : await startPostgresCluster();
  const url = external ?? cluster!.url;
  const proxyHosts = ["127.0.0.1", "localhost", "::1", "[::1]", new URL(url).hostname];
  const proxy = await startNeonWsProxy(proxyHosts).catch(async (err: unknown) => {
    await cluster?.stop();
    throw err;
  });

  project.provide("TEST_DATABASE_URL", url);
  project.provide("TEST_NEON_PROXY_PORT", proxy.port);
  process.env.TEST_DATABASE_URL = url;
  process.env.TEST_NEON_PROXY_PORT = String(proxy.port);

  return async () => {
    await proxy.stop();
    await cluster?.stop();
  };
}
