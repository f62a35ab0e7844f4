// The MCP endpoint of the Worker entry (functions/worker.ts, MCP on) in real
// workerd under `wrangler dev`, against a fresh migrated database on the test
// Postgres (postgres.js over TCP), with an API token set. Every request opens
// its own database client, and the task flow reads tasks from fresh
// connections: nothing depends on isolate memory.
import { startWrangler } from "../runtime/processes.ts";
import { mcpFlowsOnRuntime } from "./flows.ts";

mcpFlowsOnRuntime("MCP on wrangler dev (workerd)", "workerd", (env) => startWrangler(env), { EDDA_MAX_WAKE_SECONDS: "0" });
