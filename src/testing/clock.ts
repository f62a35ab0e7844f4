/**
 * The test clock, in the kit's database only. Every lease, timer, timeout,
 * rate window, debounce and schedule in the storage SQL reads the database
 * clock by name (`statement_timestamp()`, column defaults `now()`). The kit
 * creates functions of those names in its own schema, reading one row, and
 * puts that schema in the session's search_path before pg_catalog — which
 * Postgres then searches after it — so the same SQL, unchanged, reads test
 * time. Production databases have no such schema: nothing there changes.
 *
 * Test time stands still until `advance` moves it: every statement between
 * two moves sees the same instant, so a run is the same on every machine.
 * The JS side (ctx.now(), absolute deadlines) reads the same instant through
 * the engine's `clock` (EngineParts.clock).
 */
import { sql, type SQL } from "drizzle-orm";
import type { Workflow } from "../core/definitions.ts";
import { queryRows, type Executor } from "../storage/database.ts";

/** The schema holding the test clock; it must never exist in a production database. */
export const CLOCK_SCHEMA = "edda_test_clock";
/** The session search_path that makes the storage SQL read the test clock. */
export const CLOCK_SEARCH_PATH = `public, ${CLOCK_SCHEMA}, pg_catalog`;

const SHADOWED = ["statement_timestamp", "now", "transaction_timestamp", "clock_timestamp"] as const;

/** Microseconds since the epoch as a timestamptz literal (Postgres keeps microseconds; a JS Date only milliseconds). */
export function isoMicros(us: number): string {
  const ms = Math.floor(us / 1000);
  return `${new Date(ms).toISOString().slice(0, -1)}${String(us - ms * 1000).padStart(3, "0")}Z`;
}

const at = (us: number) => sql`${isoMicros(us)}::timestamptz`;

/**
 * The instant the kit's database reads, in microseconds. `tick` moves it on
 * by one microsecond: the kit ticks before each step, sweep and driving call,
 * so rows written one after the other in test time are ordered as they would
 * be in production (a start before the event it waits for, queued starts
 * first in first out), while every timestamp still shows the instant to the
 * millisecond.
 */
export class TestClock {
  constructor(
    private readonly ex: Executor,
    private us: number,
  ) {}

  get micros(): number {
    return this.us;
  }

  /** What the JS side reads (EngineParts.clock). */
  readonly millis = (): number => Math.floor(this.us / 1000);

  /** Create (or reset) the clock. Runs before the migrations, so column defaults bind to it too. */
  async install(): Promise<void> {
    await this.ex.execute(sql.raw(`CREATE SCHEMA IF NOT EXISTS ${CLOCK_SCHEMA}`));
    await this.ex.execute(sql.raw(`CREATE TABLE IF NOT EXISTS ${CLOCK_SCHEMA}.clock (id int PRIMARY KEY CHECK (id = 1), at timestamptz NOT NULL)`));
    for (const name of SHADOWED) {
      await this.ex.execute(sql.raw(`CREATE OR REPLACE FUNCTION ${CLOCK_SCHEMA}.${name}() RETURNS timestamptz LANGUAGE sql STABLE AS $$ SELECT at FROM ${CLOCK_SCHEMA}.clock WHERE id = 1 $$`));
    }
    await this.ex.execute(sql`INSERT INTO edda_test_clock.clock (id, at) VALUES (1, ${at(this.us)}) ON CONFLICT (id) DO UPDATE SET at = excluded.at`);
  }

  /** Whether the storage SQL on this session reads the test clock (a connection without the search_path would not). */
  async inUse(): Promise<boolean> {
    const [row] = await queryRows<{ same: boolean }>(this.ex, sql`SELECT statement_timestamp() = ${at(this.us)} AS same`);
    return row?.same === true;
  }

  async set(us: number): Promise<void> {
    this.us = us;
    await this.ex.execute(sql`UPDATE edda_test_clock.clock SET at = ${at(us)} WHERE id = 1`);
  }

  tick(): Promise<void> {
    return this.set(this.us + 1);
  }
}

const TERMINAL = sql`('completed', 'failed', 'cancelled')`;

/** What comes due: the kinds the timer firing covers, or another sweep task's. */
export type DueKind = "timer" | "message_timeout" | "webhook_expiry" | "deadline" | "timed_start" | "lease" | "schedule" | "rate_window";

/** Due kinds that `fireDueTimers` handles alone (every wait kind's expiry); any other needs a full sweep. */
export const FIRED_BY_TIMERS: ReadonlySet<DueKind> = new Set<DueKind>(["timer", "message_timeout", "webhook_expiry"]);

/**
 * The earliest instant in (`after`, `until`] at which something becomes due,
 * and what does: a timer (sleeps, retry backoff), a receive or event timeout,
 * a per-wait webhook's expiry, a workflow deadline, a debounced or timed
 * start, a lease running out, a schedule tick, a rate window making room for
 * a queued start. Null when
 * nothing is. Rows already due that did not fire (a quarantined instance's
 * timer) lie before `after` and are not waited for again.
 */
export async function nextDue(ex: Executor, workflows: Iterable<Workflow>, afterUs: number, untilUs: number): Promise<{ atUs: number; kinds: Set<DueKind> } | null> {
  const a = at(afterUs);
  const u = at(untilUs);
  const candidates: [DueKind, SQL][] = [
    ["timer", sql`SELECT min(expires_at) FROM workflow_timer_subscriptions WHERE expires_at > ${a} AND expires_at <= ${u}`],
    ["message_timeout", sql`SELECT min(timeout_at) FROM channel_subscriptions WHERE activity_id IS NOT NULL AND timeout_at > ${a} AND timeout_at <= ${u}`],
    ["webhook_expiry", sql`SELECT min(expires_at) FROM workflow_webhooks WHERE status = 'open' AND expires_at > ${a} AND expires_at <= ${u}`],
    ["deadline", sql`SELECT min(deadline_at) FROM workflow_instances WHERE status NOT IN ${TERMINAL} AND deadline_at > ${a} AND deadline_at <= ${u}`],
    ["timed_start", sql`SELECT min(not_before) FROM workflow_instances WHERE status = 'queued' AND not_before > ${a} AND not_before <= ${u}`],
    ["lease", sql`SELECT min(lock_expires_at) FROM workflow_instances WHERE locked_by IS NOT NULL AND lock_expires_at > ${a} AND lock_expires_at <= ${u}`],
    ["schedule", sql`SELECT min(next_run_at) FROM workflow_schedules WHERE next_run_at > ${a} AND next_run_at <= ${u}`],
  ];
  for (const wf of workflows) {
    const rate = wf.options.rateLimit;
    if (!rate) continue;
    // The oldest admission in a window leaving it is when a queued start of that key gets room.
    const end = sql`(w.admitted_at + make_interval(secs => ${rate.periodSeconds}::float8))`;
    candidates.push([
      "rate_window",
      sql`SELECT min(${end}) FROM workflow_instances w
        WHERE w.workflow_name = ${wf.workflowName} AND w.admitted_at IS NOT NULL AND ${end} > ${a} AND ${end} <= ${u}
          AND EXISTS (SELECT 1 FROM workflow_instances q WHERE q.rate_key = w.rate_key AND q.status = 'queued' AND q.admitted_at IS NULL)`,
    ]);
  }
  const union = sql.join(
    candidates.map(([kind, q]) => sql`SELECT ${kind}::text AS kind, (${q}) AS due`),
    sql` UNION ALL `,
  );
  const rows = await queryRows<{ kind: DueKind; due_us: unknown }>(
    ex,
    sql`SELECT kind, (extract(epoch FROM due) * 1000000)::int8 AS due_us FROM (${union}) AS candidates WHERE due IS NOT NULL`,
  );
  let first: number | null = null;
  let kinds = new Set<DueKind>();
  for (const r of rows) {
    const us = Number(r.due_us);
    if (first === null || us < first) [first, kinds] = [us, new Set([r.kind])];
    else if (us === first) kinds.add(r.kind);
  }
  return first === null ? null : { atUs: first, kinds };
}
