// The MCP endpoint of `npm start` (functions/node.ts, MCP on for every
// example workflow) as a real Node process on a free port, against a fresh
// migrated database on the test Postgres, with an API token set.
import { describe, afterAll, beforeAll } from "vitest";
import { freshPostgres } from "../support/engine.ts";
import { freePort } from "../support/postgres-cluster.ts";
import { spawnServer, type Server } from "../runtime/processes.ts";
import { mcpFlows } from "./flows.ts";

const token = "mcp-node-token";
let server: Server | undefined;

beforeAll(async () => {
  const { url } = await freshPostgres("mcp_node");
  const port = await freePort();
  server = await spawnServer({
    command: "npm",
    args: ["start", "--silent"],
    port,
    env: { PORT: String(port), DATABASE_URL: url, EDDA_API_TOKEN: token, EDDA_SWEEP_INTERVAL_MS: "500" },
  });
}, 90_000);

afterAll(async () => server?.stop());

describe("MCP on `npm start` (Node)", { timeout: 30_000 }, () => {
  mcpFlows({ base: () => server!.url, token });
});
