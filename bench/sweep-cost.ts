/**
 * What one cron sweep costs, as a Workers cron invocation would run it: the
 * example app (every sweep task has work to look at: a schedule, a
 * concurrency key, deadlines), follow-ups on a queue dispatcher whose sends
 * are counted, and the Workers default budget of 40 subrequests. Two cases:
 *
 *   idle     nothing due: what every minute's cron pays
 *   backlog  `--timers` expired timers (default 1,000) to fire and dispatch
 *
 *   budgeted the idle sweep as the Workers adapter runs it on a cron: a 10 ms
 *            CPU budget (Workers Free), CPU estimated from statements
 *            (SWEEP_STATEMENT_CPU_MS), tasks rotating each minute
 *
 * Per case (median over rounds): statements, queue sends (subrequests),
 * this process's CPU (the isolate's CPU time is what Workers meter; waiting
 * on Postgres is not CPU), wall time, timers fired, tasks deferred.
 * Benchmark, not test: nothing asserts.
 *
 *   npx tsx bench/sweep-cost.ts [--timers=1000] [--rounds=5]   (throwaway Postgres cluster, or DATABASE_URL)
 *   … --update-docs   (also writes the sweep-cost line of docs/deploy-cloudflare.md: the idle sweep's statements and CPU)
 */
import { execFileSync } from "node:child_process";
import { loadavg } from "node:os";
import { sql } from "drizzle-orm";
import { workflows } from "../functions/workflows/index.ts";
import { createEdda, runInvocation } from "../src/edda.ts";
import { SubrequestBudget } from "../src/engine/budget.ts";
import { QueueDispatcher, type OutgoingMessage } from "../src/engine/queue-dispatcher.ts";
import { SWEEP_STATEMENT_CPU_MS, WORKERS_FREE_SWEEP_CPU_MS, WORKERS_SUBREQUEST_BUDGET } from "../src/platform/cloudflare.ts";
import type { SweepOptions } from "../src/engine/sweeper.ts";
import { queryRows } from "../src/storage/database.ts";
import { cloneInstance } from "./lib/clone.ts";
import { processCpuMs } from "./lib/cpu.ts";
import { migrateDatabase, openEngineDatabase } from "./lib/engine.ts";
import { openBenchPostgres } from "./lib/postgres.ts";
import { median, until } from "./lib/stats.ts";
import { wantsDocsUpdate, writeFigureBlock } from "./readme-figures.ts";

const arg = (name: string, dflt: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? dflt);
const TIMERS = arg("timers", 1000);
const ROUNDS = arg("rounds", 5);

let sends = 0;
const queue = {
  maxBatch: 100,
  maxDelaySeconds: 24 * 3600,
  send: (_m: OutgoingMessage[]) => {
    sends++;
    return Promise.resolve();
  },
};

const pg = await openBenchPostgres();
try {
  const url = await pg.createDatabase("bench_sweep_cost");
  await migrateDatabase(url);
  const database = openEngineDatabase(url, 5);
  const edda = createEdda({ workflows, database, dispatcher: new QueueDispatcher(queue) });

  const oneSweep = async (budgeted = false, turn?: number) => {
    sends = 0;
    const s0 = database.stats.statements;
    const c0 = processCpuMs();
    const t0 = performance.now();
    const budget = new SubrequestBudget(WORKERS_SUBREQUEST_BUDGET);
    const options: SweepOptions = budgeted
      ? { cpuBudgetMs: WORKERS_FREE_SWEEP_CPU_MS, cpuClock: () => (database.stats.statements - s0) * SWEEP_STATEMENT_CPU_MS, ...(turn === undefined ? {} : { rotationTurn: turn }) }
      : {};
    const report = await runInvocation(edda, (engine, scope) => engine.sweep(options, scope), { budget });
    await new Promise((r) => setTimeout(r, 50)); // the held sends of the last tick
    return { statements: database.stats.statements - s0, cpuMs: processCpuMs() - c0, wallMs: performance.now() - t0, sends, timersFired: report.timersFired, deferred: report.deferred.length };
  };
  const summary = (name: string, rs: Awaited<ReturnType<typeof oneSweep>>[]) =>
    console.log(
      `| ${name} | ${median(rs.map((r) => r.statements))} | ${median(rs.map((r) => r.sends))} | ${median(rs.map((r) => r.cpuMs))!.toFixed(1)} | ${median(rs.map((r) => r.wallMs))!.toFixed(0)} | ${median(rs.map((r) => r.timersFired))} | ${median(rs.map((r) => r.deferred))} |`,
    );

  await oneSweep(); // warm-up: schedules registered, statements prepared
  const idle = [];
  for (let i = 0; i < ROUNDS; i++) idle.push(await oneSweep());
  // Budgeted: 11 consecutive turns (minutes), so every task's share of the rotation is in the median.
  const budgeted = [];
  for (let turn = 0; turn < 11; turn++) budgeted.push(await oneSweep(true, turn));

  // Backlog: one reminder brought to its timer by a step, cloned, every timer made due.
  await edda.start("reminder", { seconds: 3600 }, { instanceId: "sweep-cost-template" });
  const waiting = async () => Number((await queryRows<{ n: number }>(database.db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status = 'waiting_for_timer'`))[0]!.n);
  await runInvocation(edda, (engine) => engine.runStep({ instanceId: "sweep-cost-template" }));
  await until(async () => (await waiting()) === 1, "the template reminder to wait on its timer", 30_000);
  const backlog = [];
  for (let i = 0; i < ROUNDS; i++) {
    // Clones of the template (whose own timer stays an hour away), only theirs made due.
    const prefix = `sweep-cost-r${i}-`;
    await cloneInstance(database, "sweep-cost-template", prefix, TIMERS);
    await database.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = statement_timestamp() - interval '1 second' WHERE instance_id LIKE ${prefix + "%"}`);
    backlog.push(await oneSweep());
  }

  console.log(`one sweep, as a Workers cron invocation (budget ${WORKERS_SUBREQUEST_BUDGET} subrequests), median of ${ROUNDS}:`);
  console.log("| case | statements | queue sends (subrequests) | CPU ms (engine process) | wall ms | timers fired | tasks deferred |");
  console.log("|---|---|---|---|---|---|---|");
  summary("idle", idle);
  summary(`idle, ${WORKERS_FREE_SWEEP_CPU_MS} ms CPU budget (Workers cron), 11 turns`, budgeted);
  console.log(`(max over the 11 budgeted turns: CPU ${Math.max(...budgeted.map((r) => r.cpuMs)).toFixed(1)} ms, ${Math.max(...budgeted.map((r) => r.statements))} statements; idle CPU per statement ${(median(idle.map((r) => r.cpuMs))! / median(idle.map((r) => r.statements))!).toFixed(2)} ms, the adapter assumes ${SWEEP_STATEMENT_CPU_MS})`);
  summary(`backlog of ${TIMERS} due timers`, backlog);
  if (wantsDocsUpdate()) {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const load = loadavg().map((l) => l.toFixed(1)).join("/");
    const statements = median(idle.map((r) => r.statements))!;
    const cpu = median(idle.map((r) => r.cpuMs))!.toFixed(1);
    writeFigureBlock("sweep-cost", `  (${statements} statements, ${cpu} ms of CPU here; \`npx tsx bench/sweep-cost.ts\` at commit ${commit}, median of ${ROUNDS}, load average ${load}).\n  `);
  }
  await edda.close();
  await database.close();
} finally {
  await pg.stop();
}
