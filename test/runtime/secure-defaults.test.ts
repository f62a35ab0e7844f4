// Secure by default, in the real runtimes: functions/worker.ts under workerd
// (wrangler dev) and functions/deno.ts under Deno refuse to serve the API
// with no EDDA_API_TOKEN and no explicit EDDA_ALLOW_UNAUTHENTICATED=1 — a 503
// naming the variable, a log line, and nothing written — and an empty token
// stops the Deno server at start with the variable named.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { startDeno, startWrangler, type Server } from "./processes.ts";

let url: string;
let db: Database;
const refused = (status: number) => status === 503;

beforeAll(async () => {
  url = await freshDatabase("secure_defaults");
  db = createPostgresJsDatabase({ url, max: 1 });
  await migrate(db.db);
}, 60_000);
afterAll(async () => {
  await db?.close();
});

async function expectRefusal(server: Server) {
  for (const [method, path] of [["GET", "/healthz"], ["GET", "/instances"], ["POST", "/workflows/pipeline/instances"]] as const) {
    const res = await fetch(server.url + path, { method, ...(method === "POST" ? { headers: { "content-type": "application/json" }, body: '{"input":{"steps":1}}' } : {}) });
    expect(res.status).toBe(503);
    const body = (await res.json()) as { error: string; error_type: string; variable: string };
    expect(body).toMatchObject({ error_type: "ConfigurationError", variable: "EDDA_API_TOKEN" });
    expect(body.error).toContain("EDDA_API_TOKEN");
  }
  const [n] = await queryRows<{ n: number }>(db.db, sql`SELECT count(*)::int AS n FROM workflow_instances`);
  expect(Number(n!.n)).toBe(0);
  await expect.poll(() => server.output(), { timeout: 10_000 }).toContain("EDDA_API_TOKEN is not set");
}

describe("secure defaults in the real runtimes", { timeout: 120_000 }, () => {
  it("Deno: no token and no EDDA_ALLOW_UNAUTHENTICATED → 503 naming the variable, logged, nothing written", async () => {
    const deno = await startDeno({ DATABASE_URL: url, EDDA_SECRET: "s", EDDA_KV: "off" }, { ready: refused });
    try {
      await expectRefusal(deno);
    } finally {
      await deno.stop();
    }
  });

  it("Deno: an empty EDDA_API_TOKEN is a configuration error at start", async () => {
    const start = startDeno({ DATABASE_URL: url, EDDA_SECRET: "s", EDDA_KV: "off", EDDA_API_TOKEN: " " });
    await expect(start).rejects.toThrow(/EDDA_API_TOKEN is set but empty/);
  });

  it("Workers (workerd): no token and no EDDA_ALLOW_UNAUTHENTICATED → 503 naming the variable, logged, nothing written", async () => {
    const worker = await startWrangler({ DATABASE_URL: url, EDDA_SECRET: "s" }, { ready: refused });
    try {
      await expectRefusal(worker);
    } finally {
      await worker.stop();
    }
  });
});
