/**
 * Cloudflare Workers entry point (`wrangler dev` / `wrangler deploy`, see
 * wrangler.toml): `fetch` serves the API, the cron trigger sweeps. Settings
 * come from vars and secrets: DATABASE_URL (or a HYPERDRIVE binding),
 * DATABASE_DRIVER, EDDA_SECRET, EDDA_API_TOKEN, EDDA_BROKER_URL, EDDA_PUBLIC_URL.
 * It imports only edge-safe modules: no PGlite, no Node adapter.
 */
import { createWorker } from "../src/platform/cloudflare.ts";
import { webhooks, workflows } from "./workflows/index.ts";
import { mcp } from "../src/mcp.ts";

export default createWorker({ workflows, webhooks, mcp: mcp() });
