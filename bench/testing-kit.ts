/**
 * What the test kit costs (`edda-edge/testing`): the kit's 30-day approval
 * (test/testing/flows.ts — 30 daily receive timeouts, 29 reminders, an
 * escalation) run to its end with one `advance("30d")`, on in-memory PGlite,
 * several times in one process. Per run: opening the kit (the first also
 * builds the process's migrated PGlite dump), and the advance's wall time
 * and this process's CPU. Prints the load average beside the figures.
 * Benchmark, not test: nothing asserts.
 *
 *   npx tsx bench/testing-kit.ts [--runs 5]
 */
import { loadavg } from "node:os";
import { createTestEdda } from "../src/testing/index.ts";
import { escalate, expenseApproval, remind } from "../test/testing/flows.ts";
import { median } from "./lib/stats.ts";

const runs = Number(process.argv[process.argv.indexOf("--runs") + 1] || 5) || 5;
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const rows: { open: number; wall: number; cpu: number }[] = [];
const load = [loadavg()[0]!];
for (let i = 0; i < runs; i++) {
  let t = performance.now();
  const kit = await createTestEdda({ workflows: [expenseApproval], startAt: "2030-01-01T00:00:00Z" });
  const open = performance.now() - t;
  kit.replaceActivity(remind, async () => ({ sent: true }));
  kit.replaceActivity(escalate, async () => ({ escalated: true }));
  const run = await kit.start(expenseApproval, { requestId: `b-${i}`, approver: "a", manager: "m" });
  t = performance.now();
  const c = cpuMs();
  await kit.advance("30d");
  rows.push({ open, wall: performance.now() - t, cpu: cpuMs() - c });
  const r = await kit.result(run);
  if (r.status !== "completed") throw new Error(`run ${i} ended ${r.status}`);
  await kit.close();
}
load.push(loadavg()[0]!);
const fmt = (n: number | null) => (n === null ? "–" : n.toFixed(0));
console.log(`runs ${runs}, load average ${load.map((l) => l.toFixed(1)).join(" → ")} on ${(await import("node:os")).cpus().length} cores`);
console.log(`open kit: first ${fmt(rows[0]!.open)} ms (builds the dump), then median ${fmt(median(rows.slice(1).map((r) => r.open)))} ms`);
console.log(`advance("30d"): median ${fmt(median(rows.map((r) => r.wall)))} ms wall (min ${fmt(Math.min(...rows.map((r) => r.wall)))}), ${fmt(median(rows.map((r) => r.cpu)))} ms CPU`);
