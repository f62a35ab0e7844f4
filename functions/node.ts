/**
 * Node entry point: `npm start`. Embedded PGlite in ./.data when DATABASE_URL
 * is unset (scripts/start.mjs may start an embedded Postgres and set it); Postgres
 * otherwise, migrated on start like the embedded one (a dev server). PORT defaults to 8787. Serves GET /metrics
 * (Prometheus text) unless EDDA_METRICS=off, like the rest of the dev server on
 * loopback unless a token is set.
 */
import { serveNode } from "../src/platform/node.ts";
import { webhooks, workflows } from "./workflows/index.ts";
import { agentWorkflows } from "./workflows/agents.ts";
import { mcp } from "../src/mcp.ts";
import { ConfigurationError } from "../src/core/errors.ts";

const node = await serveNode({ workflows: [...workflows, ...agentWorkflows], webhooks, mcp: mcp(), prometheus: "unless-off", autoMigrate: true }).catch((err: unknown) => {
  // A setting to fix (a taken port, an unauthenticated public bind) is one line, not a stack.
  if (!(err instanceof ConfigurationError)) throw err;
  console.error(`edda-edge: ${err.message}`);
  process.exit(1);
});
const db = node.config.databaseUrl ? `Postgres (${node.database.driver})` : "embedded PGlite (.data/pglite)";
console.log(`edda-edge listening on http://127.0.0.1:${node.port} — ${db}`);

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    void node.close().finally(() => process.exit(0));
  });
}
