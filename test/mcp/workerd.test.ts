// The MCP endpoint of the Worker entry (functions/worker.ts, MCP on) in real
// workerd under `wrangler dev`, against a fresh migrated database on the test
// Postgres (postgres.js over TCP), with an API token set. Every request opens
// its own database client, and the task flow reads tasks from fresh
// connections: nothing depends on isolate memory.
import { describe, afterAll, beforeAll } from "vitest";
import { freshPostgres } from "../support/engine.ts";
import { startWrangler, type Server } from "../runtime/processes.ts";
import { mcpFlows } from "./flows.ts";

const token = "mcp-workerd-token";
let worker: Server | undefined;

beforeAll(async () => {
  const { url } = await freshPostgres("mcp_workerd");
  worker = await startWrangler({ DATABASE_URL: url, EDDA_SECRET: "mcp-workerd-secret", EDDA_API_TOKEN: token, EDDA_MAX_WAKE_SECONDS: "0" });
}, 90_000);

afterAll(async () => worker?.stop());

describe("MCP on wrangler dev (workerd)", { timeout: 30_000 }, () => {
  mcpFlows({ base: () => worker!.url, token });
});
