/**
 * CPU accounting, to say which side of the wire a figure is limited by: this
 * process (process.cpuUsage) and the Postgres backends serving one database
 * (Linux /proc: backends are titled `postgres: <user> <database> …`). Only
 * meaningful for a local server; null where /proc is unavailable.
 */
import { readdirSync, readFileSync } from "node:fs";

const TICK_MS = 10; // USER_HZ is 100 on every mainstream Linux build

export function processCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** utime + stime of the live backends connected to `database`, in ms (exited backends are not counted). */
export function backendCpuMs(database: string): number | null {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((p) => /^\d+$/.test(p));
  } catch {
    return null;
  }
  let ticks = 0;
  for (const pid of pids) {
    try {
      const title = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (/^postgres: \S+ (\S+) /.exec(title)?.[1] !== database) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // exited meanwhile
    }
  }
  return ticks * TICK_MS;
}

/** Starts a meter; `perUnit(n)` gives this process's and the database's CPU ms per unit of work since. */
export function cpuMeter(database: string) {
  const node0 = processCpuMs();
  const pg0 = backendCpuMs(database);
  return {
    perUnit(units: number): { node_ms: number; pg_ms: number | null } {
      const pg1 = backendCpuMs(database);
      return { node_ms: (processCpuMs() - node0) / units, pg_ms: pg0 === null || pg1 === null ? null : (pg1 - pg0) / units };
    },
  };
}
