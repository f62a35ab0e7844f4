/**
 * A served process as a benchmark meets it: spawned in its own process group and timed until
 * /healthz answers; its resident memory summed over its process tree (it and every
 * descendant, wherever they moved: Postgres's children call setsid) and over its process
 * group, from /proc. Used by bench/startup.ts and bench/embedded-default.ts.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { freePort } from "../../test/support/postgres-cluster.ts";

interface Proc {
  pid: number;
  ppid: number;
  pgrp: number;
  rssKiB: number;
}

/** Every live process with its parent, group and resident set (from /proc). */
function processes(): Proc[] {
  const out: Proc[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const rss = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${entry}/status`, "utf8"));
      out.push({ pid: Number(entry), ppid: Number(fields[1]), pgrp: Number(fields[2]), rssKiB: rss ? Number(rss[1]) : 0 });
    } catch {
      // exited while listed
    }
  }
  return out;
}

/** Resident memory of `pid` with all its descendants, and of its process group, in MiB. */
export function memoryOf(pid: number): { treeMiB: number; groupMiB: number } {
  const all = processes();
  const tree = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) {
      if (!tree.has(p.pid) && tree.has(p.ppid)) {
        tree.add(p.pid);
        grew = true;
      }
    }
  }
  const sum = (ps: Proc[]) => ps.reduce((n, p) => n + p.rssKiB, 0) / 1024;
  return { treeMiB: sum(all.filter((p) => tree.has(p.pid))), groupMiB: sum(all.filter((p) => p.pgrp === pid)) };
}

export interface Started {
  child: ChildProcess;
  port: number;
  ms: number;
  /** Everything it printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/** Spawns `command` in its own process group and times it until /healthz answers. */
export async function startUntilHealthy(command: string, args: string[], cwd: string, env: Record<string, string>): Promise<Started> {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(command, args, { cwd, detached: true, stdio: ["ignore", "pipe", "pipe"], env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env, PORT: String(port) } });
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${command} ${args.join(" ")} exited ${child.exitCode}:\n${output}`);
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status < 500, () => false);
    if (ok) break;
    if (performance.now() - t0 > 180_000) throw new Error(`${command} did not answer /healthz in 180 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const ms = performance.now() - t0;
  return {
    child,
    port,
    ms,
    output: () => output,
    async stop() {
      try {
        process.kill(-child.pid!, "SIGTERM");
      } catch {
        // gone
      }
      const t = setTimeout(() => {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {
          // gone
        }
      }, 5000);
      await exited;
      clearTimeout(t);
    },
  };
}
