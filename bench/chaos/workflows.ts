/**
 * The chaos mix: workflows whose correct outcome is implied by their input, so
 * the driver can check every instance after the kills.
 */
import { sql } from "drizzle-orm";
import { z } from "zod";
import { activity, invoke, receive, registerCompensation, sleep, subscribe, TerminalError, waitEvent, workflow, type Workflow } from "../../src/index.ts";

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

/**
 * A child: a row and its compensation, then (held) a long sleep → returns `i`;
 * cancelled with its parent → cancelled, row + undo row.
 */
export const chaosChild = workflow("chaos_child", async (ctx, input: { i: number; hold: boolean }) => {
  await record(ctx, "child");
  await registerCompensation(ctx, undo, "child");
  if (input.hold) await sleep(ctx, 3600);
  return input.i;
});

/**
 * A parent: a row and its compensation, then `children` children invoked in
 * parallel → completed with [0, 1, …]; held ones are cancelled by the driver
 * once their children sleep → parent and children cancelled, each undo row once.
 */
export const chaosParent = workflow("chaos_parent", async (ctx, input: { children: number; hold: boolean }) => {
  await record(ctx, "parent");
  await registerCompensation(ctx, undo, "parent");
  return Promise.all(Array.from({ length: input.children }, (_, i) => invoke(ctx, chaosChild, { i, hold: input.hold })));
});

/**
 * An order waiting for its own payment event (matched on `data.orderId`),
 * after a short sleep during which the driver may already have published it
 * (lookback) → completed with exactly its own payment.
 */
export const chaosOrder = workflow("chaos_order", async (ctx, orderId: string) => {
  await sleep(ctx, 1);
  const paid = await waitEvent(ctx, "chaos.paid", { match: { "data.orderId": orderId } });
  return paid.data as { orderId: string; amount: number };
});

/** Keyed concurrency: the run's interval (first to last activity) is recorded, so the driver can count overlaps per key. */
export const KEYED_LIMIT = 2;
const keyedBegin = activity("chaos_keyed_begin", async (ctx, key: string) => {
  await ctx.tx.execute(sql`INSERT INTO chaos_runs (instance_id, key, started_at) VALUES (${ctx.instanceId}, ${key}, clock_timestamp())`);
});
const keyedEnd = activity("chaos_keyed_end", async (ctx) => {
  await ctx.tx.execute(sql`UPDATE chaos_runs SET ended_at = clock_timestamp() WHERE instance_id = ${ctx.instanceId}`);
});
export const chaosKeyed = workflow(
  "chaos_keyed",
  { input: z.object({ key: z.string() }), concurrency: { key: (input: { key: string }) => input.key, limit: KEYED_LIMIT } },
  async (ctx, input) => {
    await keyedBegin(ctx, input.key);
    await sleep(ctx, 0.3);
    await keyedEnd(ctx);
    return input.key;
  },
);

export const chaosWorkflows: Workflow[] = [chaosSteps, chaosSaga, chaosConsumer, chaosListener, chaosCancel, chaosSlow, chaosChild, chaosParent, chaosOrder, chaosKeyed];

export const CHAOS_TABLES = [
  sql`CREATE TABLE IF NOT EXISTS chaos_rows (id serial PRIMARY KEY, instance_id text NOT NULL, tag text NOT NULL)`,
  sql`CREATE TABLE IF NOT EXISTS chaos_consumed (id serial PRIMARY KEY, message_id text NOT NULL, instance_id text NOT NULL)`,
  sql`CREATE TABLE IF NOT EXISTS chaos_runs (id serial PRIMARY KEY, instance_id text NOT NULL, key text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz)`,
];
