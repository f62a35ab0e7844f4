// The package as users get it: `npm pack` of this repository (which builds
// dist/ first), installed into an empty project with no TypeScript loader,
// then the README's three recipes run as written — plain `node` on embedded
// PGlite and on Postgres (migrated by the package's own CLI), a Worker
// bundled by `wrangler deploy --dry-run` (measured, and free of PGlite), Deno
// running the Deno entry — and `tsc` type-checking a consumer file whose
// expected-error lines prove input/output inference. Also: the API report and
// the JSR dry run (`deno publish --dry-run`, slow types included).
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { freshDatabase } from "../support/db.ts";
import { freePort } from "../support/postgres-cluster.ts";
import { ROOT, spawnServer, type Server } from "../runtime/processes.ts";
import { readRecipes } from "./readme.ts";

const exec = promisify(execFile);
const BIN = (name: string) => join(ROOT, "node_modules", ".bin", name);
const recipes = readRecipes(ROOT);
const rootPkg = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as {
  version: string;
  exports: Record<string, unknown>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

let work: string;
let app: string;
const servers: Server[] = [];

/** Runs in the consumer project with a clean environment: no tsx loader, no repository paths. */
function run(command: string, args: string[], env: Record<string, string> = {}, timeout = 300_000) {
  return exec(command, args, { cwd: app, timeout, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NO_COLOR: "1", ...env }, maxBuffer: 32 * 1024 * 1024 });
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "edda-consumer-"));
  app = join(work, "app");
  const { stdout } = await exec("npm", ["pack", "--pack-destination", work, "--silent"], { cwd: ROOT, timeout: 300_000, maxBuffer: 32 * 1024 * 1024 });
  const tarball = join(work, stdout.trim().split("\n").pop()!);
  await exec("mkdir", ["-p", app]);
  await writeFile(join(app, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  // The README's install line, with the packed tarball for edda-edge and the
  // repository's versions pinned for the rest (so the npm cache serves them).
  const install = recipes.commands.find((c) => c.startsWith("npm install "))!;
  const pin = (name: string) => (name === "edda-edge" ? tarball : `${name}@${rootPkg.dependencies[name] ?? rootPkg.devDependencies[name] ?? "latest"}`);
  const packages = install.split(/\s+/).slice(2).map(pin);
  await run("npm", ["install", ...packages, "zod@" + rootPkg.dependencies.zod, "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"]);
  for (const [file, body] of Object.entries(recipes.files)) await writeFile(join(app, file), body);
}, 600_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

async function serve(command: string, args: string[], env: Record<string, string>): Promise<Server> {
  const port = await freePort();
  const server = await spawnServer({ command, args, port, env: { ...env, PORT: String(port), NODE_OPTIONS: "" }, cwd: app, startTimeoutMs: 240_000 });
  servers.push(server);
  return server;
}

/** The README's curl (with its JSON content type), then polling the instance until it completes. */
async function helloRoundTrip(base: string, token?: string): Promise<unknown> {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const res = await fetch(`${base}/workflows/hello/instances`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ input: { name: "Ada" } }) });
  expect(res.status).toBe(201);
  const { instanceId } = (await res.json()) as { instanceId: string };
  const deadline = Date.now() + 60_000;
  for (;;) {
    const view = (await (await fetch(`${base}/instances/${instanceId}`, { headers })).json()) as { status: string; output: unknown };
    if (view.status === "completed") return view.output;
    if (Date.now() > deadline) throw new Error(`instance ${instanceId} is ${view.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("the packed package in an empty project", () => {
  it("installs compiled JavaScript and declarations only: no TypeScript sources, no tests", async () => {
    const dist = join(app, "node_modules", "edda-edge", "dist");
    const files = (await readdir(dist, { recursive: true })) as string[];
    expect(files).toContain("index.js");
    expect(files).toContain("index.d.ts");
    expect(files.some((f) => f.endsWith(".js.map"))).toBe(true);
    expect(files.filter((f) => /(?<!\.d)\.ts$/.test(f))).toEqual([]);
    const top = await readdir(join(app, "node_modules", "edda-edge"));
    expect(top.sort()).toEqual(["README.md", "bin", "dist", "package.json"]);
  });

  it("a user's test file with edda-edge/testing (the test kit guide's) passes under node --test", { timeout: 300_000 }, async () => {
    const kit = readRecipes(ROOT, "## A test file", "docs/testing.md");
    expect(Object.keys(kit.files)).toEqual(["approval.test.mjs"]);
    for (const [file, body] of Object.entries(kit.files)) await writeFile(join(app, file), body);
    const command = kit.commands.find((c) => c.startsWith("node --test "))!;
    const r = await run("node", command.split(/\s+/).slice(1));
    expect(r.stdout).toMatch(/^# pass 2$/m);
    expect(r.stdout).toMatch(/^# fail 0$/m);
  });

  it("node server.mjs (the README recipe) runs a workflow on embedded PGlite", { timeout: 300_000 }, async () => {
    const server = await serve("node", ["server.mjs"], { DATABASE_URL: "" });
    expect(await helloRoundTrip(server.url)).toBe("Hello, Ada!");
    await server.stop();
  });

  it("the same server.mjs runs on Postgres after `npx edda-edge migrate` from the package", { timeout: 300_000 }, async () => {
    const url = await freshDatabase("consumer_node");
    const migrated = await run(join(app, "node_modules", ".bin", "edda-edge"), ["migrate", "--json"], { DATABASE_URL: url });
    expect(JSON.parse(migrated.stdout)).toMatchObject({ applied: expect.arrayContaining([1]) as unknown });
    const server = await serve("node", ["server.mjs"], { DATABASE_URL: url });
    expect(await helloRoundTrip(server.url)).toBe("Hello, Ada!");
    await server.stop();
  });

  // The registry's postgres.js, unpatched (installed with --ignore-scripts, as any app would): a transaction
  // whose connection drops must not end the process (porsager/postgres#1208) — the package's own driver fences it.
  it("the packed server on Postgres, once serving, survives its connections being terminated over and over", { timeout: 300_000 }, async () => {
    const url = await freshDatabase("consumer_kills");
    await run(join(app, "node_modules", ".bin", "edda-edge"), ["migrate"], { DATABASE_URL: url });
    const server = await serve("node", ["server.mjs"], { DATABASE_URL: url });
    const admin = createPostgresJsDatabase({ url, max: 1 });
    try {
      // Serving first, so every kill meets a server that is up (no connection fetches array types any more: docs/design.md).
      expect(await helloRoundTrip(server.url)).toBe("Hello, Ada!");
      const starts: Promise<unknown>[] = [];
      for (let round = 0; round < 25; round++) {
        starts.push(fetch(`${server.url}/workflows/hello/instances`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { name: `n${round}` } }) }).catch(() => null));
        await admin.db.execute(sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await Promise.all(starts);
      if (server.child.exitCode !== null) console.log(server.output());
      expect(server.child.exitCode).toBeNull();
      // The crash signature of porsager/postgres#1208 (other TypeErrors, e.g. a failed fetch, may be logged and handled).
      expect(server.output()).not.toContain("Cannot read properties of null (reading 'write')");
      // A pooled connection killed while idle fails the next statement on it once (a 500 today, see docs/design.md); then traffic flows.
      const after = await helloRoundTrip(server.url).catch(() => helloRoundTrip(server.url));
      expect(after).toBe("Hello, Ada!");
    } finally {
      await admin.close();
      await server.stop();
    }
  });

  it("wrangler bundles the Worker recipe without PGlite, MCP, the viewer, the migrator or Neon's driver, warning-free, within the size budget", { timeout: 300_000 }, async () => {
    const out = join(work, "worker-out");
    const built = await run(process.execPath, [join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js"), "deploy", "--dry-run", "--outdir", out, "--metafile", join(out, "meta.json")], {
      WRANGLER_SEND_METRICS: "false",
      CI: "true",
    });
    const meta = JSON.parse(await readFile(join(out, "meta.json"), "utf8")) as { inputs: Record<string, unknown>; outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }> };
    const inputs = Object.keys(meta.inputs);
    // What the script holds: files read but shaken away entirely have no bytes in the output.
    const script = Object.entries(meta.outputs).find(([k]) => k.endsWith("worker.js"))![1];
    const kept = Object.entries(script.inputs).filter(([, i]) => i.bytesInOutput > 0).map(([f]) => f);
    expect(inputs.some((f) => f.includes("node_modules/edda-edge/dist/platform/cloudflare.js"))).toBe(true);
    expect(inputs.filter((f) => /pglite|@hono\/node-server|platform\/node\.js/.test(f))).toEqual([]);
    // The recipe does not enable MCP: neither the package's mcp entry nor the SDK and its validator are in it.
    expect(inputs.filter((f) => /edda-edge\/dist\/mcp\.js|@modelcontextprotocol|node_modules\/(ajv|ajv-formats|fast-uri|zod-to-json-schema)\//.test(f))).toEqual([]);
    expect(kept.filter((f) => /zod\/v4\/locales\/(?!en\.js)/.test(f))).toEqual([]);
    // The recipe imports no driver: postgres.js, the default, is in it; Neon's driver is not.
    expect(kept.filter((f) => /@neondatabase\/serverless|drizzle-orm\/neon-serverless/.test(f))).toEqual([]);
    expect(kept.some((f) => f.includes("node_modules/postgres/"))).toBe(true);
    expect(built.stderr.split("\n").filter((l) => /WARNING/.test(l))).toEqual([]);
    const code = await readFile(join(out, "worker.js"));
    // No migrator (a Worker never migrates) and no viewer (the recipe does not pass viewer()): neither their chunks of
    // dist/ nor their code, wherever the package's bundler put it: the migrator's version query, the migrations' SQL
    // (drizzle's own dialect has a CREATE TABLE, so not that), the viewer's login form.
    expect(kept.filter((f) => /edda-edge\/dist\/(viewer\.js|surface-|migrate-)/.test(f))).toEqual([]);
    for (const marker of ["to_regclass('schema_version')", "DEFAULT now() NOT NULL", "/ui/login"]) expect(code.includes(marker), marker).toBe(false);
    const gzip = gzipSync(code).length;
    console.log(`Worker bundle from the package: ${(code.length / 1024).toFixed(0)} KiB raw, ${(gzip / 1024).toFixed(0)} KiB gzipped`);
    // 210 KiB gzipped from the package at 73e44aa (bench/worker-bundle.ts measures the sources: 210), grown from 187 with
    // the product's own code (why, deployments, values by reference, encryption); the same bound as worker-bundle.test.ts.
    expect(gzip).toBeLessThan(225 * 1024);
  });

  // `--help` and the remote commands load the CLI and its argument parser only: a resolve hook records every module Node loads.
  it("`edda-edge --help` and a remote command load no engine, no database driver, no drizzle, no PGlite", { timeout: 120_000 }, async () => {
    const trace = join(work, "loaded.txt");
    await writeFile(
      join(app, "trace.mjs"),
      `import { register } from "node:module";\nregister("data:text/javascript," + encodeURIComponent(${JSON.stringify(
        'import { appendFileSync } from "node:fs"; export async function load(url, context, next) { appendFileSync(process.env.EDDA_TRACE_FILE, url + "\\n"); return next(url, context); }',
      )}));\n`,
    );
    const bin = join(app, "node_modules", "edda-edge", "bin", "edda-edge.mjs");
    const help = await run(process.execPath, ["--import", "./trace.mjs", bin, "--help"], { EDDA_TRACE_FILE: trace });
    expect(help.stdout).toContain("usage: edda-edge <command>");
    const remote = await run(process.execPath, ["--import", "./trace.mjs", bin, "instances", "list", "--url", "http://127.0.0.1:9"], { EDDA_TRACE_FILE: trace }).catch((e: { code: number; stderr: string }) => e);
    expect("code" in remote && remote.code).toBe(1);
    const loaded = (await readFile(trace, "utf8")).split("\n").filter(Boolean);
    expect(loaded.some((u) => u.endsWith("/node_modules/edda-edge/dist/cli.js"))).toBe(true);
    const heavy = /drizzle-orm|@electric-sql|node_modules\/postgres\/|@neondatabase|node_modules\/hono\/|node_modules\/zod\/|edda-edge\/dist\/(edda|migrate|dev|verify-replay|postgres-js)-/;
    expect(loaded.filter((u) => heavy.test(u))).toEqual([]);
  });

  it("deno runs the Deno recipe (main.ts) from the installed package on Postgres", { timeout: 300_000 }, async () => {
    const url = await freshDatabase("consumer_deno");
    await run(join(app, "node_modules", ".bin", "edda-edge"), ["migrate"], { DATABASE_URL: url });
    // The README maps @edda/edge to JSR with `deno add`; here it maps to the npm package installed from the tarball.
    const imports = Object.fromEntries(Object.keys(rootPkg.exports).filter((k) => k !== "./package.json").map((k) => [`@edda/edge${k.slice(1)}`, `npm:edda-edge${k.slice(1)}`]));
    await writeFile(join(app, "deno.json"), JSON.stringify({ nodeModulesDir: "manual", imports }));
    const server = await serve(BIN("deno"), ["run", "-A", "main.ts"], { DATABASE_URL: url, EDDA_SECRET: "consumer-secret", EDDA_API_TOKEN: "consumer-token", DENO_NO_UPDATE_CHECK: "1" });
    expect(await helloRoundTrip(server.url, "consumer-token")).toBe("Hello, Ada!");
    await server.stop();
  });

  it("tsc type-checks a consumer of the typed API; each expected error is real", { timeout: 300_000 }, async () => {
    await writeFile(join(app, "typed.ts"), await readFile(join(ROOT, "test", "package", "fixtures", "typed.ts"), "utf8"));
    await writeFile(
      join(app, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, skipLibCheck: true, types: [], lib: ["ES2023", "DOM"] }, files: ["typed.ts"] }),
    );
    const r = await run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"]).catch((e: { stdout: string }) => e);
    expect("code" in r ? r.stdout : "").toBe("");
  });

  // The README says why consumers need skipLibCheck: drizzle-orm's declarations import drivers a project does not have
  // (column-builder.d.ts reaches gel-core, which imports "gel"). Without it, every error is in drizzle's files: none in
  // edda-edge's declarations, none in the consumer's code.
  it("with skipLibCheck: false, tsc finds errors only in drizzle-orm's declaration files", { timeout: 300_000 }, async () => {
    await writeFile(join(app, "typed.ts"), await readFile(join(ROOT, "test", "package", "fixtures", "typed.ts"), "utf8"));
    await writeFile(
      join(app, "tsconfig.strict-libs.json"),
      JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, skipLibCheck: false, types: [], lib: ["ES2023", "DOM"] }, files: ["typed.ts"] }),
    );
    const r = await run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.strict-libs.json"]).catch((e: { stdout: string }) => e);
    const errors = ("code" in r ? r.stdout : "").split("\n").filter((l) => /: error TS\d+:/.test(l));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.filter((l) => !l.startsWith("node_modules/drizzle-orm/"))).toEqual([]);
  });
});

describe("release checks", () => {
  it("the API report in etc/api matches the built declarations", { timeout: 300_000 }, async () => {
    const r = await exec(process.execPath, ["--import", "tsx", join(ROOT, "scripts", "api-report.ts")], { cwd: ROOT, timeout: 300_000 }).catch((e: { stderr: string; code: number }) => e);
    expect("code" in r ? r.stderr : "", "run `npm run build && npm run api:update` and review etc/api/").toBe("");
  });

  it("deno.json (JSR) names the same version and entries as package.json", async () => {
    const jsr = JSON.parse(await readFile(join(ROOT, "deno.json"), "utf8")) as { name: string; version: string; exports: Record<string, string> };
    expect(jsr.name).toBe("@edda/edge");
    expect(jsr.version).toBe(rootPkg.version);
    expect(Object.keys(jsr.exports).sort()).toEqual(Object.keys(rootPkg.exports).filter((k) => k !== "./package.json").sort());
    for (const target of Object.values(jsr.exports)) expect((await stat(join(ROOT, target))).isFile()).toBe(true);
  });

  it("`deno publish --dry-run` passes, slow-type check included", { timeout: 300_000 }, async () => {
    const r = await exec(BIN("deno"), ["publish", "--dry-run", "--allow-dirty"], { cwd: ROOT, timeout: 300_000, env: { ...process.env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" } }).catch(
      (e: { stderr: string; code: number }) => e,
    );
    expect("code" in r ? r.stderr : "").toBe("");
  });
});
