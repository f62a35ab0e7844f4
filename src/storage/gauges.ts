/**
 * The database's side of the metrics gauges (engine/metrics.ts): one
 * read-only statement that samples what only the database knows — queued
 * instances per flow-control key, timers due and how late the oldest is,
 * outbox rows waiting and how old the oldest is, dead letters, quarantined
 * instances. Each part rides an index (the queue keys' partial indexes,
 * the timers' and outbox's time indexes); the queue part is bounded by a
 * limit, so a database with many keys still answers one bounded row set.
 * Runs only when metrics are on, once per sweep or scrape.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, toNumber, WAITING, type Row } from "./rows.ts";
import { WAIT_KINDS, type InstanceStatus, type WaitKind, type WhyKind } from "../core/model.ts";

export interface GaugeSample {
  /** Queued instances per key (`{workflow}:{key}` of concurrency, rate limit or debounce), deepest first. */
  queues: { key: string; depth: number }[];
  /** Timers whose expiry has passed and that have not fired yet. */
  timersDue: number;
  /** Seconds the oldest due timer is past its expiry (0 when none is due): the sweep's fire lag. */
  timerLagSeconds: number;
  /** Outbox rows not yet relayed (pending, failed and retrying, or being sent). */
  outboxPending: number;
  /** Age in seconds of the oldest such row (0 when none): the relay's lag. */
  outboxLagSeconds: number;
  /** Outbox rows set aside, by status (`invalid`, `expired`). */
  deadLetters: { invalid: number; expired: number };
  quarantined: number;
  /**
   * Unfinished instances by status and reason (`GET /instances/:id/why`'s kind, decided from the row
   * as engine/why.ts decides it), each with the age in seconds of the oldest in that state.
   */
  reasons: { status: InstanceStatus; reason: WhyKind; count: number; oldestSeconds: number }[];
}

/** Leases whose holder let them expire and that nobody has taken over yet (a dead or stalled engine). */
export interface ExpiredLeases {
  count: number;
  /** Seconds since the oldest of them expired (0 when none). */
  oldestSeconds: number;
}

export interface GaugesArea {
  /**
   * One sample of the gauges; at most `queueLimit` queue keys. With `registered` (the workflows
   * this app runs), an unfinished instance of any other workflow counts as `pinned`.
   */
  sampleGauges(queueLimit: number, registered?: readonly string[]): Promise<GaugeSample>;
  /** The runnable instances whose lease expired untaken (readiness detail). */
  expiredLeases(): Promise<ExpiredLeases>;
}

/*
 * The reason of an unfinished instance row, in SQL: the same questions in the same order as
 * engine/why.ts (set aside, code not here, queued by which key, the lease of a runnable one, the
 * wait kind), where engine/why.ts's answer needs only the row and an EXISTS on the wait's own rows.
 * A wait kind reports its own name (from its declaration), so a new kind needs nothing here;
 * test/engine/why.test.ts checks that both agree on every kind.
 */
const WAIT_REASON = sql.join(
  (Object.keys(WAIT_KINDS) as WaitKind[]).map((k) => {
    const own = sql.raw(`'${k}'`);
    if (k === "timer") return sql`WHEN i.status = ${WAITING.timer} THEN CASE WHEN EXISTS (SELECT 1 FROM workflow_timer_subscriptions t WHERE t.instance_id = i.instance_id AND t.timer_id LIKE '%#retry%') THEN 'retry_backoff' ELSE ${own} END`;
    if (k === "message") {
      return sql`WHEN i.status = ${WAITING.message} THEN CASE WHEN EXISTS (SELECT 1 FROM channel_subscriptions s WHERE s.instance_id = i.instance_id AND s.activity_id IS NOT NULL AND (s.lookback_from IS NOT NULL OR s.match IS NOT NULL)) THEN 'event' ELSE ${own} END`;
    }
    return sql`WHEN i.status = ${WAITING[k]} THEN ${own}`;
  }),
  sql` `,
);
const LEASE_EXPIRED = sql`i.locked_by IS NOT NULL AND i.lock_expires_at IS NOT NULL AND i.lock_expires_at <= ${DB_NOW}`;
const RUNNABLE_ROW = sql`i.status IN ('running', 'compensating')`;

function reasonRows(registered: readonly string[] | undefined) {
  const pinned = registered === undefined ? sql`false` : registered.length === 0 ? sql`true` : sql`i.workflow_name NOT IN (${sql.join(registered.map((n) => sql`${n}`), sql`, `)})`;
  return sql`SELECT 'why' AS part, w.status || '|' || w.reason AS key, count(*)::float8 AS a, COALESCE(EXTRACT(EPOCH FROM ${DB_NOW} - min(w.since)), 0)::float8 AS b FROM (
      SELECT i.status,
        CASE WHEN i.status = 'quarantined' THEN 'quarantined' WHEN i.status = 'parked' THEN 'parked' WHEN ${pinned} THEN 'pinned'
             WHEN i.status = 'queued' THEN CASE WHEN i.debounce_key IS NOT NULL THEN 'debounce' WHEN i.rate_key IS NOT NULL AND i.admitted_at IS NULL THEN 'rate_limit' ELSE 'concurrency' END
             WHEN ${RUNNABLE_ROW} THEN CASE WHEN i.locked_by IS NULL THEN 'dispatch_pending' WHEN ${LEASE_EXPIRED} THEN 'leased' ELSE 'running' END
             ${WAIT_REASON} ELSE 'none' END AS reason,
        CASE WHEN i.status IN ('quarantined', 'parked') THEN i.updated_at WHEN i.status = 'queued' THEN i.started_at
             WHEN ${RUNNABLE_ROW} AND ${LEASE_EXPIRED} THEN i.lock_expires_at WHEN ${RUNNABLE_ROW} AND i.locked_by IS NOT NULL THEN coalesce(i.locked_at, i.updated_at)
             ELSE i.updated_at END AS since
      FROM workflow_instances i WHERE i.status NOT IN ('completed', 'failed', 'cancelled')
    ) w GROUP BY w.status, w.reason`;
}

export function gaugesArea(ex: Executor): GaugesArea {
  return {
    async sampleGauges(queueLimit, registered) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT 'queue' AS part, q.key, q.depth::float8 AS a, 0::float8 AS b FROM (
              SELECT COALESCE(concurrency_key, rate_key, debounce_key) AS key, count(*) AS depth
              FROM workflow_instances WHERE status = 'queued' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ${queueLimit}) q
            UNION ALL
            SELECT 'timers', NULL, count(*)::float8, COALESCE(EXTRACT(EPOCH FROM ${DB_NOW} - min(t.expires_at)), 0)::float8
              FROM workflow_timer_subscriptions t JOIN workflow_instances i ON i.instance_id = t.instance_id
              WHERE t.expires_at <= ${DB_NOW} AND i.status <> 'quarantined'
            UNION ALL
            SELECT 'outbox', NULL, count(*)::float8, COALESCE(EXTRACT(EPOCH FROM ${DB_NOW} - min(COALESCE(rearmed_at, created_at))), 0)::float8
              FROM outbox_events WHERE status IN ('pending', 'failed', 'processing')
            UNION ALL
            SELECT 'dead', NULL, count(*) FILTER (WHERE status = 'invalid')::float8, count(*) FILTER (WHERE status = 'expired')::float8
              FROM outbox_events WHERE status IN ('invalid', 'expired')
            UNION ALL
            SELECT 'quarantined', NULL, count(*)::float8, 0 FROM workflow_instances WHERE status = 'quarantined'
            UNION ALL
            ${reasonRows(registered)}`,
      );
      const sample: GaugeSample = { queues: [], timersDue: 0, timerLagSeconds: 0, outboxPending: 0, outboxLagSeconds: 0, deadLetters: { invalid: 0, expired: 0 }, quarantined: 0, reasons: [] };
      for (const r of rows) {
        const a = toNumber(r.a);
        const b = toNumber(r.b);
        if (r.part === "queue") sample.queues.push({ key: String(r.key), depth: a });
        else if (r.part === "timers") [sample.timersDue, sample.timerLagSeconds] = [a, Math.max(0, b)];
        else if (r.part === "outbox") [sample.outboxPending, sample.outboxLagSeconds] = [a, Math.max(0, b)];
        else if (r.part === "dead") sample.deadLetters = { invalid: a, expired: b };
        else if (r.part === "quarantined") sample.quarantined = a;
        else if (r.part === "why") {
          const [status, reason] = String(r.key).split("|") as [InstanceStatus, WhyKind];
          sample.reasons.push({ status, reason, count: a, oldestSeconds: Math.max(0, b) });
        }
      }
      return sample;
    },

    async expiredLeases() {
      const [row] = await queryRows<Row>(
        ex,
        sql`SELECT count(*)::int AS n, COALESCE(EXTRACT(EPOCH FROM ${DB_NOW} - min(i.lock_expires_at)), 0)::float8 AS oldest
            FROM workflow_instances i WHERE ${RUNNABLE_ROW} AND ${LEASE_EXPIRED}`,
      );
      return { count: toNumber(row?.n ?? 0), oldestSeconds: Math.max(0, toNumber(row?.oldest ?? 0)) };
    },
  };
}
