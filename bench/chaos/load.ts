/**
 * `npm run chaos -- --under-load`: CPU-burning child processes (`node -e`
 * busy loops at nice 19, so Postgres and the workers still get time) that put
 * the machine's 1-minute load average at `target` or more before the chaos
 * run starts, and are killed when it ends.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { loadavg, setPriority } from "node:os";

export interface Load {
  /** 1-, 5- and 15-minute load averages, formatted. */
  now(): string;
  /** Kill the burners (idempotent). */
  stop(): void;
}

const fmt = () => loadavg().map((x) => x.toFixed(2)).join(" ");

/** Start `procs` busy loops and wait (at most `rampMs`) for the 1-minute load average to reach `target`. */
export async function startLoad(procs: number, target: number, rampMs: number, log: (line: string) => void): Promise<Load> {
  const burners: ChildProcess[] = [];
  const stop = () => {
    for (const p of burners) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  };
  try {
    for (let i = 0; i < procs; i++) {
      const p = spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" });
      burners.push(p);
      if (p.pid !== undefined) setPriority(p.pid, 19);
    }
    const t0 = Date.now();
    while (loadavg()[0]! < target && Date.now() - t0 < rampMs) await new Promise((r) => setTimeout(r, 1000));
    log(`chaos: ${procs} CPU burners at nice 19, load average ${fmt()} after ${((Date.now() - t0) / 1000).toFixed(0)} s (target ${target})`);
  } catch (err) {
    stop();
    throw err;
  }
  return { now: fmt, stop };
}
