// The MCP endpoint of the Deno entry (functions/deno.ts, MCP on) in real Deno
// (the `deno` npm package), against a fresh migrated database on the test
// Postgres, with an API token set.
import { startDeno } from "../runtime/processes.ts";
import { mcpFlowsOnRuntime } from "./flows.ts";

mcpFlowsOnRuntime("MCP on Deno (functions/deno.ts)", "deno", startDeno, { EDDA_SWEEP_INTERVAL_MS: "500" });
