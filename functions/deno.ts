/**
 * Deno entry point (`deno task start`, Deno Deploy): the API on Deno.serve
 * (PORT, default 8000), the sweep on Deno.cron or an interval. Settings from
 * the environment: DATABASE_URL, DATABASE_DRIVER, NEON_WS_PROXY, EDDA_SECRET,
 * EDDA_API_TOKEN, EDDA_BROKER_URL, EDDA_PUBLIC_URL, EDDA_SWEEP_INTERVAL_MS.
 * Migrate the database first: `DATABASE_URL=... npx edda-edge migrate`.
 */
import { serveDeno } from "../src/platform/deno.ts";
import { workflows } from "./workflows/index.ts";

const server = serveDeno({ workflows, mcp: true });
console.log(`edda-edge (Deno) listening on ${server.url} — Postgres via ${server.database.driver}`);
