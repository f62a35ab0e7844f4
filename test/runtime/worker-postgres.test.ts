// functions/worker.ts in real workerd (`wrangler dev`), Postgres through
// postgres.js over TCP (nodejs_compat); follow-ups and cron dispatches travel
// over the ctx.exports loopback (EDDA_PUBLIC_URL unset).
import { describe } from "vitest";
import { workerFlows } from "./worker-flows.ts";

describe("Worker on workerd, postgres.js", { timeout: 30_000 }, () => {
  workerFlows({ prefix: "workerd_pg", full: true });
});
