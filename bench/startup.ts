/**
 * Start-up time and idle memory, measured as a newcomer meets them:
 *
 *   dev      a fresh clone of a commit (`git clone`, node_modules linked from
 *            this checkout instead of `npm ci`): `npm start` to the first
 *            answer of /healthz, cold (no ./.data) and on restart. Cold
 *            twice: first on the machine (an empty PGlite template cache:
 *            initdb, EDDA_PGLITE_TEMPLATE_CACHE in a fresh folder per round)
 *            and with the template the first start left (any later fresh
 *            ./.data on the machine); commits before the template have
 *            initdb both times. Idle RSS
 *            of its process tree (npm and what it starts) and of its process
 *            group, 5 s after it answers; `node bin/edda-edge.mjs --help`.
 *   package  `npm pack` of the same clone installed into an empty project, the
 *            README's `node server.mjs` on embedded PGlite, cold and restart,
 *            idle RSS; `npx edda-edge --help` from the installed package.
 *
 * Each figure is the median of `--runs` (default 3). Prints a table, writes
 * bench/results/startup.json. The machine is shared: the load average is
 * printed with the figures. Benchmark, not test: nothing asserts.
 *
 *   npx tsx bench/startup.ts [--ref=HEAD] [--runs=3] [--only=dev|package]
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { readRecipes } from "../test/package/readme.ts";
import { memoryOf, startUntilHealthy } from "./lib/serve.ts";
import { median } from "./lib/stats.ts";

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, "..");
const opt = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const REF = opt("ref") ?? "HEAD";
const RUNS = Number(opt("runs") ?? 3);
const ONLY = opt("only");
const IDLE_MS = 5000;

async function timeCommand(command: string, args: string[], cwd: string): Promise<number> {
  const t0 = performance.now();
  await exec(command, args, { cwd, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" } });
  return performance.now() - t0;
}

interface Served {
  /** Cold, first on the machine (no template yet). */
  coldMs: number[];
  /** Cold again (./.data removed), the template of the first cold start in the cache. */
  coldTemplateMs: number[];
  restartMs: number[];
  treeMiB: number[];
  groupMiB: number[];
}

/** Cold start (no data folder), then a restart on the data it left, `RUNS` times; memory after idling. */
async function serveRounds(command: string, args: string[], cwd: string, env: Record<string, string>): Promise<Served> {
  const r: Served = { coldMs: [], coldTemplateMs: [], restartMs: [], treeMiB: [], groupMiB: [] };
  for (let i = 0; i < RUNS; i++) {
    const cache = await mkdtemp(join(tmpdir(), "edda-template-"));
    const withCache = { ...env, EDDA_PGLITE_TEMPLATE_CACHE: cache };
    await rm(join(cwd, ".data"), { recursive: true, force: true });
    const cold = await startUntilHealthy(command, args, cwd, withCache);
    r.coldMs.push(cold.ms);
    await cold.stop();
    await rm(join(cwd, ".data"), { recursive: true, force: true });
    const again = await startUntilHealthy(command, args, cwd, withCache);
    r.coldTemplateMs.push(again.ms);
    await again.stop();
    const warm = await startUntilHealthy(command, args, cwd, withCache);
    r.restartMs.push(warm.ms);
    await new Promise((res) => setTimeout(res, IDLE_MS));
    const mem = memoryOf(warm.child.pid!);
    r.treeMiB.push(mem.treeMiB);
    r.groupMiB.push(mem.groupMiB);
    await warm.stop();
    await rm(cache, { recursive: true, force: true });
  }
  return r;
}

const load = () => loadavg().map((l) => l.toFixed(1)).join(", ");
const work = await mkdtemp(join(tmpdir(), "edda-startup-"));
const clone = join(work, "clone");
const results: Record<string, unknown> = { ref: REF, runs: RUNS, loadBefore: load() };
try {
  await exec("git", ["clone", "--quiet", ROOT, clone]);
  await exec("git", ["checkout", "--quiet", (await exec("git", ["rev-parse", REF], { cwd: ROOT })).stdout.trim()], { cwd: clone });
  results.commit = (await exec("git", ["rev-parse", "--short", "HEAD"], { cwd: clone })).stdout.trim();
  symlinkSync(join(ROOT, "node_modules"), join(clone, "node_modules"));
  const rows: string[][] = [];
  const ms = (xs: number[]) => `${(median(xs)! / 1000).toFixed(2)} s`;
  const mib = (xs: number[]) => `${median(xs)!.toFixed(0)} MiB`;

  if (ONLY !== "package") {
    const dev = await serveRounds("npm", ["start"], clone, { DATABASE_URL: "" });
    const help: number[] = [];
    for (let i = 0; i < RUNS; i++) help.push(await timeCommand(process.execPath, ["bin/edda-edge.mjs", "--help"], clone));
    results.dev = { ...dev, helpMs: help };
    rows.push(["`npm start`, fresh clone, to first `/healthz`: cold (first on the machine) / cold (template) / restart", `${ms(dev.coldMs)} / ${ms(dev.coldTemplateMs)} / ${ms(dev.restartMs)}`]);
    rows.push(["`npm start` idle RSS: process tree / process group", `${mib(dev.treeMiB)} / ${mib(dev.groupMiB)}`]);
    rows.push(["`node bin/edda-edge.mjs --help` (checkout)", `${median(help)!.toFixed(0)} ms`]);
  }

  if (ONLY !== "dev") {
    const app = join(work, "app");
    mkdirSync(app);
    const { stdout } = await exec("npm", ["pack", "--pack-destination", work, "--silent"], { cwd: clone, maxBuffer: 32 * 1024 * 1024 });
    const tarball = join(work, stdout.trim().split("\n").pop()!);
    const pkg = JSON.parse(readFileSync(join(clone, "package.json"), "utf8")) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    const recipes = readRecipes(clone);
    const install = recipes.commands.find((c) => c.startsWith("npm install "))!;
    const pin = (name: string) => (name === "edda-edge" ? tarball : `${name}@${pkg.dependencies[name] ?? pkg.devDependencies[name] ?? "latest"}`);
    await exec("npm", ["install", ...install.split(/\s+/).slice(2).map(pin), "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"], { cwd: app, maxBuffer: 32 * 1024 * 1024 });
    writeFileSync(join(app, "server.mjs"), recipes.files["server.mjs"]!);
    const served = await serveRounds(process.execPath, ["server.mjs"], app, { DATABASE_URL: "" });
    const help: number[] = [];
    const bin = join(app, "node_modules", ".bin", "edda-edge");
    if (existsSync(bin)) for (let i = 0; i < RUNS; i++) help.push(await timeCommand(bin, ["--help"], app));
    results.package = { ...served, helpMs: help };
    rows.push(["consumer `node server.mjs` (tarball, PGlite): cold (first on the machine) / cold (template) / restart", `${ms(served.coldMs)} / ${ms(served.coldTemplateMs)} / ${ms(served.restartMs)}`]);
    rows.push(["consumer with PGlite, idle RSS (the node process)", mib(served.treeMiB)]);
    rows.push(["`npx edda-edge --help` (installed package)", `${median(help)!.toFixed(0)} ms`]);
  }

  results.loadAfter = load();
  console.log(`start-up and memory at ${String(results.commit)}, median of ${RUNS}, load average before ${String(results.loadBefore)}, after ${String(results.loadAfter)}:`);
  console.log("| What | Figure |\n|---|---|");
  for (const [what, figure] of rows) console.log(`| ${what} | ${figure} |`);
  mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
  writeFileSync(join(ROOT, "bench", "results", `startup-${String(results.commit)}.json`), JSON.stringify(results, null, 2));
} finally {
  await rm(work, { recursive: true, force: true });
}
