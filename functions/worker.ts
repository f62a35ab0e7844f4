/**
 * Cloudflare Workers entry point (`wrangler dev` / `wrangler deploy`, see
 * wrangler.toml): `fetch` serves the API, the cron trigger sweeps. Settings
 * come from vars and secrets: DATABASE_URL (or a HYPERDRIVE binding),
 * DATABASE_DRIVER, EDDA_SECRET, EDDA_API_TOKEN, EDDA_BROKER_URL, EDDA_PUBLIC_URL.
 * It imports only edge-safe modules: no PGlite, no Node adapter. It bundles
 * both serverless drivers so DATABASE_DRIVER can pick either (the tests run
 * it on each); a Worker that needs one imports only that one. MCP and the
 * viewer are on, as in the other entries; a Worker without them leaves
 * `mcp()` / `viewer()` out, and their code with them.
 */
import { createWorker } from "../src/platform/cloudflare.ts";
import { neonServerless } from "../src/storage/drivers/neon-serverless.ts";
import { postgresJs } from "../src/storage/drivers/postgres-js.ts";
import { webhooks, workflows } from "./workflows/index.ts";
import { mcp } from "../src/mcp.ts";
import { viewer } from "../src/viewer.ts";

export default createWorker({ workflows, webhooks, mcp: mcp(), viewer: viewer(), driver: [postgresJs, neonServerless] });
