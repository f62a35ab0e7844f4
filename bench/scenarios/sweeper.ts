/**
 * Sweeper: `timers` instances parked on a timer (one brought there by the
 * engine, the rest cloned in bulk), every timer expired by hand; then the
 * clock starts: `sweep()` fires them in bounded batches and dispatches, the
 * local dispatcher runs each instance's next step, which completes it.
 * Figure: seconds until every instance has resumed and completed.
 */
import { sql } from "drizzle-orm";
import { createEdda } from "../../src/edda.ts";
import { queryRows } from "../../src/storage/database.ts";
import { cloneInstance } from "../lib/clone.ts";
import { BenchDispatcher, completionTracker, migrateDatabase, openEngineDatabase } from "../lib/engine.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { nowMs, until } from "../lib/stats.ts";
import { timerWake } from "../workflows.ts";

export interface SweeperOptions {
  timers: number;
  pool: number;
  concurrency: number;
}

export interface SweeperResult {
  sweep_10k_timers_s: number;
  sweep_fire_s: number;
  timers: number;
}

export async function runSweeper(pg: BenchPostgres, opts: SweeperOptions): Promise<SweeperResult> {
  const url = await pg.createDatabase("bench_sweeper");
  await migrateDatabase(url);
  const database = openEngineDatabase(url, opts.pool);
  const dispatcher = new BenchDispatcher({ concurrency: opts.concurrency });
  const tracker = completionTracker();
  const edda = createEdda({ workflows: [timerWake], database, dispatcher, hooks: tracker.hooks });
  const count = async (status: string) =>
    Number((await queryRows<{ n: number }>(database.db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status = ${status}`))[0]!.n);
  try {
    await edda.start(timerWake, null, { instanceId: "sweep-template" });
    await until(async () => (await count("waiting_for_timer")) === 1, "the template instance to wait on its timer", 30_000);
    await cloneInstance(database, "sweep-template", "sweep-", opts.timers - 1);
    await database.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = statement_timestamp() - interval '1 second'`);
    await database.db.execute(sql`ANALYZE`);
    if ((await count("waiting_for_timer")) !== opts.timers) throw new Error("sweeper set-up: wrong number of waiting instances");

    tracker.reset();
    const t0 = nowMs();
    let fired = 0;
    while (fired < opts.timers) {
      const report = await edda.sweep();
      fired += report.timersFired;
      if (report.timersFired === 0) break;
    }
    const fireSeconds = (nowMs() - t0) / 1000;
    await tracker.waitFor(opts.timers, 600_000);
    const seconds = (nowMs() - t0) / 1000;
    await dispatcher.idle();
    return { sweep_10k_timers_s: seconds, sweep_fire_s: fireSeconds, timers: fired };
  } finally {
    await edda.close();
    await database.close();
  }
}
