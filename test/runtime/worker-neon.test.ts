// functions/worker.ts in real workerd (`wrangler dev`), Postgres through
// Neon's serverless driver over WebSockets via a local proxy this file starts
// (so it can count what went through it); follow-ups as plain fetches to
// EDDA_PUBLIC_URL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNeonWsProxy, type NeonWsProxy } from "../support/neon-proxy.ts";
import { workerFlows } from "./worker-flows.ts";

describe("Worker on workerd, Neon serverless driver", { timeout: 30_000 }, () => {
  let proxy: NeonWsProxy;
  beforeAll(async () => {
    proxy = await startNeonWsProxy();
  });
  afterAll(async () => {
    await proxy?.stop();
  });

  workerFlows({
    prefix: "workerd_neon",
    vars: () => ({ DATABASE_DRIVER: "neon-serverless", NEON_WS_PROXY: `127.0.0.1:${proxy.port}` }),
    publicUrl: true,
  });

  it("reached Postgres through the Neon WebSocket driver (the proxy forwarded its connections)", () => {
    expect(proxy.connections).toBeGreaterThan(0);
  });
});
