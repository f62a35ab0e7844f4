// functions/worker.ts in real workerd (`wrangler dev`), Postgres through
// Neon's serverless driver over WebSockets via the harness's local proxy;
// follow-ups as plain fetches to EDDA_PUBLIC_URL.
import { describe, inject } from "vitest";
import { workerFlows } from "./worker-flows.ts";

describe("Worker on workerd, Neon serverless driver", { timeout: 30_000 }, () => {
  workerFlows({
    prefix: "workerd_neon",
    vars: { DATABASE_DRIVER: "neon-serverless", NEON_WS_PROXY: `127.0.0.1:${inject("TEST_NEON_PROXY_PORT")}` },
    publicUrl: true,
  });
});
