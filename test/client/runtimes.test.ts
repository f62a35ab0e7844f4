// The client beyond Node: under real Deno (its own fetch), and bundled for a
// browser with no Node built-ins (esbuild, platform "browser"): it reaches
// nothing of the server (no database driver, no Hono, no zod).
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { serve, type ServerType } from "@hono/node-server";
import { build } from "esbuild";
import { afterAll, beforeAll, expect, it } from "vitest";
import { workflows } from "../../functions/workflows/index.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const TOKEN = "runtime-token";
let t: TestApp;
let server: ServerType;
let baseUrl: string;

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("pglite", "client-rt"), { workflows, apiToken: TOKEN });
  server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: t.edda.app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const addr = server.address();
  baseUrl = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
}, 120_000);
afterAll(async () => {
  await new Promise((r) => server?.close(r));
  await t?.edda.close();
  await t?.database.close();
});

it("runs under Deno: start a pipeline and wait for its result", { timeout: 120_000 }, async () => {
  const r = await promisify(execFile)(join(ROOT, "node_modules", ".bin", "deno"), ["run", "--allow-net", "--allow-env", "--no-lock", "test/runtime/fixtures/client-deno.ts"], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: "1", EDDA_URL: baseUrl, EDDA_TOKEN: TOKEN },
  });
  expect(JSON.parse(r.stdout.trim().split("\n").pop()!)).toEqual({ runtime: "deno", status: "completed", output: { completed: 2 } });
});

it("bundles for the browser with no Node built-ins and none of the server", async () => {
  const out = await build({ entryPoints: [join(ROOT, "src/client/index.ts")], bundle: true, platform: "browser", format: "esm", write: false, metafile: true, minify: true });
  const inputs = Object.keys(out.metafile.inputs);
  expect(inputs).toEqual(["src/client/index.ts"]);
  expect(out.outputFiles[0]!.text.length).toBeLessThan(6_000);
});
