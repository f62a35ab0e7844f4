/**
 * One chaos worker process: a Node server on the shared Postgres with the
 * http dispatcher (follow-ups go to the next worker in the ring), short
 * leases and a frequent sweep, so killed work is picked up quickly — or,
 * with CHAOS_DEFAULT_LEASES=1, the default lease, hand-off lease and sweep
 * interval, where nothing but a working recovery path resumes a step that a
 * database outage interrupted before its 300 s lease runs out.
 */
import { serveNode } from "../../src/platform/node.ts";
import { chaosWorkflows } from "./workflows.ts";

const port = Number(process.env.PORT);
const next = process.env.CHAOS_NEXT_URL!;
const node = await serveNode({
  workflows: chaosWorkflows,
  port,
  dispatcher: { http: { baseUrl: next } },
  ...(process.env.CHAOS_DEFAULT_LEASES === "1" ? {} : { leaseSeconds: 3, handoffLeaseSeconds: 2, sweepIntervalMs: 300 }),
});
process.send?.({ ready: node.port });
