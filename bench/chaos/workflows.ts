/**
 * The chaos mix: workflows whose correct outcome is implied by their input, so
 * the driver can check every instance after the kills.
 */
import { sql } from "drizzle-orm";
import { activity, receive, registerCompensation, sleep, subscribe, TerminalError, workflow, type Workflow } from "../../src/index.ts";

const record = activity("chaos_record", async (ctx, tag: string) => {
  await ctx.tx.execute(sql`INSERT INTO chaos_rows (instance_id, tag) VALUES (${ctx.instanceId}, ${tag})`);
  return tag;
});
const undo = activity("chaos_undo", async (ctx, tag: string) => {
  await ctx.tx.execute(sql`INSERT INTO chaos_rows (instance_id, tag) VALUES (${ctx.instanceId}, ${"undo:" + tag})`);
});
const explode = activity("chaos_explode", async () => {
  throw new TerminalError("planned failure");
});
const consume = activity("chaos_consume", async (ctx, messageId: string) => {
  await ctx.tx.execute(sql`INSERT INTO chaos_consumed (message_id, instance_id) VALUES (${messageId}, ${ctx.instanceId})`);
});

/**
 * A row, then on attempts up to `timeouts` a statement that outlives its
 * `SET LOCAL statement_timeout` (Postgres cancels it: 57014): the attempt
 * fails, its row is rolled back with it, and the durable retry runs again.
 */
const slowRecord = activity(
  "chaos_slow_record",
  async (ctx, timeouts: number) => {
    await ctx.tx.execute(sql`INSERT INTO chaos_rows (instance_id, tag) VALUES (${ctx.instanceId}, 'slow')`);
    if (ctx.attempt <= timeouts) {
      await ctx.tx.execute(sql`SET LOCAL statement_timeout = '50ms'`);
      await ctx.tx.execute(sql`SELECT pg_sleep(2)`);
    }
    return ctx.attempt;
  },
  { retry: { initialIntervalSeconds: 0.2, maxAttempts: 10 } },
);

/**
 * The slow activity beside a plain one in the same tick (each in its own
 * savepoint) → completed after `timeouts` statement timeouts, one `slow` and
 * one `p` row.
 */
export const chaosSlow = workflow("chaos_slow", async (ctx, timeouts: number) => {
  const [attempts] = await Promise.all([slowRecord(ctx, timeouts), record(ctx, "p")]);
  return { attempts };
});

/** steps transactional rows with a sleep in the middle → completed, `steps` rows. */
export const chaosSteps = workflow("chaos_steps", async (ctx, steps: number) => {
  for (let i = 1; i <= steps; i++) {
    await record(ctx, `s${i}`);
    if (i === 1) await sleep(ctx, 0.2);
  }
  return { done: steps };
});

/** a row, its compensation registered, then a terminal failure → failed, row + undo row. */
export const chaosSaga = workflow("chaos_saga", async (ctx) => {
  await record(ctx, "a");
  await registerCompensation(ctx, undo, "a");
  await explode(ctx);
});

/** competing consumer of `n` jobs → completed, each job consumed by exactly one consumer. */
export const chaosConsumer = workflow("chaos_consumer", async (ctx, n: number) => {
  await subscribe(ctx, "chaos_jobs", "competing");
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const m = await receive(ctx, "chaos_jobs");
    await consume(ctx, m.id);
    ids.push(m.id);
  }
  return ids;
});

/** broadcast listener until "STOP" → every later message, in order. */
export const chaosListener = workflow("chaos_listener", async (ctx) => {
  await subscribe(ctx, "chaos_news", "broadcast");
  const seqs: number[] = [];
  for (;;) {
    const m = await receive<number | "STOP">(ctx, "chaos_news");
    if (m.data === "STOP") return seqs;
    seqs.push(m.data);
  }
});

/** a row + compensation, then a long sleep; the driver cancels it → cancelled, row + undo row. */
export const chaosCancel = workflow("chaos_cancel", async (ctx) => {
  await record(ctx, "c");
  await registerCompensation(ctx, undo, "c");
  await sleep(ctx, 3600);
});

export const chaosWorkflows: Workflow[] = [chaosSteps, chaosSaga, chaosConsumer, chaosListener, chaosCancel, chaosSlow];

export const CHAOS_TABLES = [
  sql`CREATE TABLE IF NOT EXISTS chaos_rows (id serial PRIMARY KEY, instance_id text NOT NULL, tag text NOT NULL)`,
  sql`CREATE TABLE IF NOT EXISTS chaos_consumed (id serial PRIMARY KEY, message_id text NOT NULL, instance_id text NOT NULL)`,
];
