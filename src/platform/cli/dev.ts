/**
 * `edda-edge dev <module>`: serves the workflows a module exports on embedded
 * PGlite (data kept in --data-dir, migrated on start) and restarts the server
 * when a file next to the module changes.
 *
 * The server runs in a child process that the watcher replaces on change: an
 * ES module cannot be unloaded, and a fresh process is the only reload that
 * never mixes old and new code. The child closes the database before it
 * exits, so the next one opens the same data. A child that fails (a syntax
 * error) is reported and the watcher waits for the next change.
 *
 * TypeScript modules load through tsx when it is installed (an optional peer
 * dependency), else through Node's own type stripping where it has it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, watch } from "node:fs";
import { dirname, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import type { Workflow } from "../../core/definitions.ts";
import { serveNode } from "../node.ts";
import { parseCommand, UsageError, type Io } from "./args.ts";

export const DEV_USAGE = `usage: edda-edge dev <module> [--port <n>] [--data-dir <dir>] [--no-watch] [--json]
  Serves the workflows <module> exports (named exports, or an array as "workflows" or default)
  on embedded PGlite at http://127.0.0.1:<port>, restarting when a file beside it changes.
  --port <n>        port (default PORT, else 8787)
  --data-dir <dir>  PGlite data folder (default .data/pglite)
  --no-watch        serve once, no reload
  --json            say where it listens as one JSON line ({"url", "workflows", "dataDir"})`;

const CHILD_FLAG = "EDDA_DEV_SERVER";
const IGNORED = ["node_modules", ".git", ".data", ".wrangler", "dist"];
/** Changes to these reload the server; logs, data and editor files do not. */
const SOURCE = /\.(?:[mc]?[jt]sx?|json)$/;

export async function dev(argv: string[], env: Record<string, string | undefined>, io: Io): Promise<number> {
  const { values, positionals, help } = parseCommand(argv, { port: { type: "string" }, "data-dir": { type: "string" }, "no-watch": { type: "boolean" }, json: { type: "boolean" } }, DEV_USAGE, io);
  if (help) return 0;
  const [module] = positionals;
  if (!module) throw new UsageError("missing the workflows module", DEV_USAGE);
  const file = resolve(module);
  if (!existsSync(file)) throw new UsageError(`no such file: ${module}`, DEV_USAGE);
  const port = Number(values.port ?? env.PORT ?? 8787);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number, got ${JSON.stringify(values.port)}`, DEV_USAGE);
  const dataDir = resolve((values["data-dir"] as string | undefined) ?? ".data/pglite");
  if (values["no-watch"] || env[CHILD_FLAG]) return serve(file, port, dataDir, env, io, values.json === true);
  return supervise(file, argv, dataDir, env, io);
}

/** Runs the server in this process until SIGINT/SIGTERM. */
async function serve(file: string, port: number, dataDir: string, env: Record<string, string | undefined>, io: Io, json: boolean): Promise<number> {
  const workflows = await loadWorkflows(file);
  const { DATABASE_URL: _ignored, ...embedded } = env;
  const node = await serveNode({ workflows, port, dataDir, env: embedded });
  const where = { url: `http://127.0.0.1:${node.port}`, workflows: workflows.map((w) => w.workflowName), dataDir: relative(process.cwd(), dataDir) || "." };
  io.out(json ? JSON.stringify(where) : `edda-edge dev: ${where.workflows.join(", ")} on ${where.url} (embedded PGlite in ${where.dataDir})`);
  await new Promise<void>((done) => {
    for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => done());
  });
  await node.close();
  return 0;
}

export async function loadWorkflows(file: string): Promise<Workflow[]> {
  if (/\.[mc]?tsx?$/.test(file)) {
    const tsx = await import("tsx/esm/api").catch(() => null);
    tsx?.register();
  }
  const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const isWorkflow = (v: unknown): v is Workflow => typeof v === "object" && v !== null && typeof (v as Workflow).workflowName === "string" && typeof (v as Workflow).fn === "function";
  const listed = [mod.workflows, mod.default].find((v) => Array.isArray(v) && v.every(isWorkflow)) as Workflow[] | undefined;
  const found = listed ?? Object.values(mod).filter(isWorkflow);
  if (found.length === 0) throw new Error(`${file} exports no workflows (export them by name, or an array as "workflows" or default)`);
  return found;
}

/** Runs the server as a child process and replaces it whenever a file beside the module changes. */
async function supervise(file: string, argv: string[], dataDir: string, env: Record<string, string | undefined>, io: Io): Promise<number> {
  const root = dirname(file);
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  const start = () => {
    const c = spawn(process.execPath, [...process.execArgv, process.argv[1]!, "dev", ...argv], { stdio: "inherit", env: { ...env, [CHILD_FLAG]: "1" } });
    child = c;
    exited = new Promise<void>((done) =>
      c.once("exit", (code, signal) => {
        if (child === c && signal === null) io.err(`edda-edge dev: the server exited (code ${code}); waiting for a change`);
        if (child === c) child = null;
        done();
      }),
    );
  };
  const stop = async () => {
    const c = child;
    child = null;
    c?.kill("SIGTERM");
    await exited;
  };

  let timer: NodeJS.Timeout | null = null;
  let restarting = Promise.resolve();
  const watcher = watch(root, { recursive: true }, (_event, name) => {
    if (!name) return;
    const path = resolve(root, name.toString());
    if (!SOURCE.test(path) || path.startsWith(dataDir) || name.toString().split(sep).some((part) => IGNORED.includes(part))) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      restarting = restarting.then(async () => {
        io.out(`edda-edge dev: ${relative(process.cwd(), path)} changed, reloading`);
        await stop();
        start();
      });
    }, 100);
  });

  start();
  await new Promise<void>((done) => {
    for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => done());
  });
  watcher.close();
  if (timer) clearTimeout(timer);
  await restarting;
  await stop();
  return 0;
}
