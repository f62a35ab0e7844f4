// Child processes for the runtime tests: real `wrangler dev` (workerd), real
// Deno, real Node workers. Each binds 127.0.0.1 on a free port, runs in its
// own process group (wrangler starts workerd underneath), and is killed with
// the whole group on stop — tests call stop() in afterAll, and a process exit
// hook kills whatever a crashed run left behind.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../support/postgres-cluster.ts";

export const ROOT = join(import.meta.dirname, "..", "..");

export interface Server {
  url: string;
  port: number;
  child: ChildProcess;
  /** Everything the process printed so far. */
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const c of live) killGroup(c, "SIGKILL");
});

function killGroup(child: ChildProcess, signal: NodeJS.Signals) {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

export interface SpawnOptions {
  command: string;
  args: string[];
  env?: Record<string, string>;
  port: number;
  /** Resolves when the server answers this path (default /healthz). */
  readyPath?: string;
  /** Whether a status on readyPath means "up" (default: below 500). */
  ready?: (status: number) => boolean;
  startTimeoutMs?: number;
  /** Working directory (default: the repository). */
  cwd?: string;
  cleanup?: () => Promise<void>;
}

export async function spawnServer(opts: SpawnOptions): Promise<Server> {
  let out = "";
  const child = spawn(opts.command, opts.args, {
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, ...opts.env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  live.add(child);
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${opts.port}`;
  const server: Server = {
    url,
    port: opts.port,
    child,
    output: () => out,
    async stop(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) {
        killGroup(child, signal);
        const t = setTimeout(() => killGroup(child, "SIGKILL"), 3000);
        await exited;
        clearTimeout(t);
      }
      killGroup(child, "SIGKILL"); // stragglers of the group (workerd)
      live.delete(child);
      await opts.cleanup?.();
    },
  };
  const deadline = Date.now() + (opts.startTimeoutMs ?? 60_000);
  for (;;) {
    if (child.exitCode !== null) {
      await server.stop();
      throw new Error(`${opts.command} exited with ${child.exitCode} before it was ready:\n${out}`);
    }
    const ok = await fetch(url + (opts.readyPath ?? "/healthz")).then((r) => (opts.ready ?? ((s: number) => s < 500))(r.status), () => false);
    if (ok) return server;
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`${opts.command} not ready after ${opts.startTimeoutMs ?? 60_000} ms:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * `wrangler dev` on functions/worker.ts (or the Worker a `config` file names)
 * with `--var` settings and /__scheduled enabled; `publicUrl` also sets
 * EDDA_PUBLIC_URL to the server's own address.
 */
export async function startWrangler(vars: Record<string, string>, opts: { publicUrl?: boolean; ready?: (status: number) => boolean; config?: string } = {}): Promise<Server> {
  const [port, inspector] = [await freePort(), await freePort()];
  if (opts.publicUrl) vars = { ...vars, EDDA_PUBLIC_URL: `http://127.0.0.1:${port}` };
  // The tests fire the cron by hand and expect one sweep to run every task: no Free-plan CPU budget
  // (its rotation is tested in test/engine/sweep-budget.test.ts) unless a test sets one.
  vars = { EDDA_SWEEP_CPU_MS: "0", ...vars };
  const state = await mkdtemp(join(tmpdir(), "edda-wrangler-"));
  const args = [
    join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js"),
    "dev",
    ...(opts.config ? ["--config", opts.config] : []),
    "--ip", "127.0.0.1",
    "--port", String(port),
    "--inspector-port", String(inspector),
    "--test-scheduled",
    "--persist-to", state,
    "--show-interactive-dev-session=false",
    "--log-level", "info",
    ...Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
  ];
  return spawnServer({
    command: process.execPath,
    args,
    port,
    env: { WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" },
    ...(opts.ready ? { ready: opts.ready } : {}),
    cleanup: () => rm(state, { recursive: true, force: true }),
  });
}

/** `deno run -A functions/deno.ts` with `env`. */
export async function startDeno(env: Record<string, string>, opts: { ready?: (status: number) => boolean } = {}): Promise<Server> {
  const port = await freePort();
  return spawnServer({
    command: join(ROOT, "node_modules", ".bin", "deno"),
    args: ["run", "-A", "functions/deno.ts"],
    port,
    env: { ...env, PORT: String(port), NO_COLOR: "1" },
    ...(opts.ready ? { ready: opts.ready } : {}),
  });
}

/** A Node script run through tsx, serving on PORT. */
export async function startNodeScript(script: string, env: Record<string, string>): Promise<Server> {
  const port = await freePort();
  return spawnServer({
    command: process.execPath,
    args: ["--import", "tsx", script],
    port,
    env: { ...env, PORT: String(port) },
  });
}

export interface InstanceView {
  instanceId: string;
  status: string;
  output: unknown;
  error: unknown;
}

export async function api<T = unknown>(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(base + path, {
    method,
    ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
}

/** Poll GET /instances/:id until its status is one of `statuses`. */
export async function waitForStatus(base: string, id: string, statuses: string[], timeoutMs = 20_000): Promise<InstanceView> {
  const deadline = Date.now() + timeoutMs;
  let last: InstanceView | null = null;
  for (;;) {
    const r = await api<InstanceView>(base, "GET", `/instances/${id}`);
    if (r.status === 200) last = r.body;
    if (last && statuses.includes(last.status)) return last;
    if (Date.now() > deadline) throw new Error(`instance ${id} did not reach ${statuses.join("/")} (now ${last?.status ?? `HTTP ${r.status}`})`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
