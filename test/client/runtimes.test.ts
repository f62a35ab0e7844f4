// The client beyond Node, each time starting a pipeline and waiting for its
// result against a Node-served app: under real Deno (its own fetch), inside a
// Worker in real workerd (wrangler dev, no nodejs_compat), and in a real
// browser (Debian's Chromium via playwright-core, the esbuild browser bundle
// loaded as a module from the app's origin). The browser bundle has no Node
// built-ins and reaches nothing of the server (no driver, no Hono, no zod).
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { workflows } from "../../functions/workflows/index.ts";
import { startWrangler } from "../runtime/processes.ts";
import { serveTestApp, type Listening } from "../support/listen.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { chromiumLaunch } from "../support/chromium.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const TOKEN = "runtime-token";
let t: TestApp;
let server: Listening;
let baseUrl: string;
let browserBundle: string;

const bundleClient = () => build({ entryPoints: [join(ROOT, "src/client/index.ts")], bundle: true, platform: "browser", format: "esm", write: false, metafile: true, minify: true });

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("pglite", "client-rt"), { workflows, apiToken: TOKEN });
  browserBundle = (await bundleClient()).outputFiles[0]!.text;
  // The app, plus a page and the client bundle on the same origin for the browser.
  server = await serveTestApp(t, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/__client/page.html") return new Response("<!doctype html><title>client</title>", { headers: { "content-type": "text/html" } });
    if (path === "/__client/client.js") return new Response(browserBundle, { headers: { "content-type": "text/javascript" } });
    return undefined;
  });
  baseUrl = server.url;
}, 120_000);
afterAll(() => server?.close());

it("runs under Deno: start a pipeline and wait for its result", { timeout: 120_000 }, async () => {
  const r = await promisify(execFile)(join(ROOT, "node_modules", ".bin", "deno"), ["run", "--allow-net", "--allow-env", "--no-lock", "test/runtime/fixtures/client-deno.ts"], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: "1", EDDA_URL: baseUrl, EDDA_TOKEN: TOKEN },
  });
  expect(JSON.parse(r.stdout.trim().split("\n").pop()!)).toEqual({ runtime: "deno", status: "completed", output: { completed: 2 } });
});

it("runs in a Worker in real workerd: start a pipeline and wait for its result", { timeout: 120_000 }, async () => {
  const worker = await startWrangler({ EDDA_URL: baseUrl, EDDA_TOKEN: TOKEN }, { config: join(ROOT, "test/runtime/fixtures/client-worker.toml") });
  try {
    const r = await fetch(`${worker.url}/run`);
    expect(r.status, worker.output()).toBe(200);
    expect(await r.json()).toEqual({ runtime: "workerd", status: "completed", output: { completed: 2 } });
  } finally {
    await worker.stop();
  }
});

it("runs in Chromium: the browser bundle starts a pipeline and waits for its result", { timeout: 120_000 }, async () => {
  const profile = mkdtempSync(join(tmpdir(), "edda-client-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    ...(await chromiumLaunch()),
    headless: true,
    chromiumSandbox: false,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${baseUrl}/__client/page.html`);
    // A string, not a function: the test runner rewrites `import()` in this file's functions.
    const result = await page.evaluate<{ userAgent: string; status: string; output: unknown }>(`(async () => {
      const { createClient } = await import("/__client/client.js");
      const edda = createClient({ baseUrl: location.origin, token: ${JSON.stringify(TOKEN)} });
      const run = await edda.start("pipeline", { steps: 2 });
      const outcome = await run.result({ timeoutSeconds: 30 });
      return { userAgent: navigator.userAgent, status: outcome.status, output: outcome.output };
    })()`);
    expect(result.userAgent).toMatch(/Chrome\//);
    expect({ status: result.status, output: result.output }).toEqual({ status: "completed", output: { completed: 2 } });
    expect(errors).toEqual([]);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

it("bundles for the browser with no Node built-ins and none of the server", async () => {
  const out = await bundleClient();
  const inputs = Object.keys(out.metafile.inputs);
  // the client's own modules only (its core, the stream reader, the repair methods): nothing of the server
  expect(inputs.every((f) => f.startsWith("src/client/")), inputs.join(", ")).toBe(true);
  expect(inputs).toContain("src/client/index.ts");
  // 8.2 KB with the stream iterator and the repair methods; the bound catches a server module pulled in
  expect(out.outputFiles[0]!.text.length).toBeLessThan(10_000);
});
