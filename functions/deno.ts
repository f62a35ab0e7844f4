/**
 * Deno entry point (`deno task start`, Deno Deploy): the API on Deno.serve
 * (PORT, default 8000), the sweep on Deno.cron (plus an interval when
 * EDDA_SWEEP_INTERVAL_MS is set), follow-ups on the Deno KV queue where KV is
 * available (EDDA_KV_PATH picks a local database file; EDDA_KV=off falls back
 * to signed fetches). Settings from the environment: DATABASE_URL,
 * DATABASE_DRIVER, NEON_WS_PROXY, EDDA_SECRET, EDDA_API_TOKEN, EDDA_BROKER_URL,
 * EDDA_PUBLIC_URL. Migrate the database first: `DATABASE_URL=... npx edda-edge migrate`.
 */
import { createDenoApp } from "../src/platform/deno.ts";
import { webhooks, workflows } from "./workflows/index.ts";
import { mcp } from "../src/mcp.ts";

const useKv = typeof Deno.openKv === "function" && Deno.env.get("EDDA_KV") !== "off";
const kv = useKv ? await Deno.openKv(Deno.env.get("EDDA_KV_PATH")) : undefined;
const app = createDenoApp({ workflows, webhooks, mcp: mcp(), ...(kv ? { kv } : {}) });

// Deno Deploy registers cron jobs and the queue listener only from the module's top level, before the server starts.
Deno.cron("edda-sweep", "* * * * *", async () => {
  await app.sweep();
  console.log("edda: cron sweep done");
});
kv?.listenQueue(app.runQueued);

const server = app.serve();
console.log(`edda-edge (Deno) listening on ${server.url} — Postgres via ${server.database.driver}, follow-ups via ${app.transport}`);
