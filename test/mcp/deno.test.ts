// The MCP endpoint of the Deno entry (functions/deno.ts, MCP on) in real Deno
// (the `deno` npm package), against a fresh migrated database on the test
// Postgres, with an API token set.
import { describe, afterAll, beforeAll } from "vitest";
import { freshPostgres } from "../support/engine.ts";
import { startDeno, type Server } from "../runtime/processes.ts";
import { mcpFlows } from "./flows.ts";

const token = "mcp-deno-token";
let deno: Server | undefined;

beforeAll(async () => {
  const { url } = await freshPostgres("mcp_deno");
  deno = await startDeno({ DATABASE_URL: url, EDDA_SECRET: "mcp-deno-secret", EDDA_API_TOKEN: token, EDDA_SWEEP_INTERVAL_MS: "500" });
}, 90_000);

afterAll(async () => deno?.stop());

describe("MCP on Deno (functions/deno.ts)", { timeout: 30_000 }, () => {
  mcpFlows({ base: () => deno!.url, token });
});
