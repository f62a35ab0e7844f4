/**
 * Fan-out: `subscribers` instances subscribed to one broadcast channel and
 * waiting in `receive`; then the clock starts: one publish from a client,
 * whose post-commit wake-up delivers the message to every waiting subscriber
 * and dispatches them; each one's next step completes it.
 * Figures: seconds from the publish until every subscriber has completed, and
 * until the last one was delivered to (dispatched by the wake-up).
 */
import { sql } from "drizzle-orm";
import { createEdda } from "../../src/edda.ts";
import { publish } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { BenchDispatcher, completionTracker, migrateDatabase, openEngineDatabase } from "../lib/engine.ts";
import type { BenchPostgres } from "../lib/postgres.ts";
import { nowMs, until } from "../lib/stats.ts";
import { FANOUT_CHANNEL, fanoutSubscriber } from "../workflows.ts";

export interface FanoutOptions {
  subscribers: number;
  pool: number;
  concurrency: number;
}

export interface FanoutResult {
  fanout_1k_s: number;
  fanout_delivered_s: number;
  subscribers: number;
}

export async function runFanout(pg: BenchPostgres, opts: FanoutOptions): Promise<FanoutResult> {
  const url = await pg.createDatabase("bench_fanout");
  await migrateDatabase(url);
  const database = openEngineDatabase(url, opts.pool);
  const dispatcher = new BenchDispatcher({ concurrency: opts.concurrency });
  const tracker = completionTracker();
  const edda = createEdda({ workflows: [fanoutSubscriber], database, dispatcher, hooks: tracker.hooks });
  const waiting = async () =>
    Number((await queryRows<{ n: number }>(database.db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status = 'waiting_for_message'`))[0]!.n);
  try {
    await Promise.all(Array.from({ length: opts.subscribers }, () => edda.start(fanoutSubscriber, null)));
    await until(async () => (await waiting()) === opts.subscribers, `${opts.subscribers} subscribers to wait in receive`, 300_000, 100);
    await dispatcher.idle();
    tracker.reset();
    const fresh0 = dispatcher.fresh;
    const t0 = nowMs();
    await publish(edda, FANOUT_CHANNEL, { hello: "everyone" });
    await tracker.waitFor(opts.subscribers, 600_000);
    const done = nowMs();
    if (dispatcher.fresh - fresh0 < opts.subscribers) throw new Error(`${dispatcher.fresh - fresh0} wake-up dispatches for ${opts.subscribers} subscribers`);
    return { fanout_1k_s: (done - t0) / 1000, fanout_delivered_s: (dispatcher.lastFreshMs - t0) / 1000, subscribers: opts.subscribers };
  } finally {
    await edda.close();
    await database.close();
  }
}
