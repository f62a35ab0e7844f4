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
import { DB_NOW, toNumber, type Row } from "./rows.ts";

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
}

export interface GaugesArea {
  /** One sample of the gauges; at most `queueLimit` queue keys. */
  sampleGauges(queueLimit: number): Promise<GaugeSample>;
}

export function gaugesArea(ex: Executor): GaugesArea {
  return {
    async sampleGauges(queueLimit) {
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
            SELECT 'quarantined', NULL, count(*)::float8, 0 FROM workflow_instances WHERE status = 'quarantined'`,
      );
      const sample: GaugeSample = { queues: [], timersDue: 0, timerLagSeconds: 0, outboxPending: 0, outboxLagSeconds: 0, deadLetters: { invalid: 0, expired: 0 }, quarantined: 0 };
      for (const r of rows) {
        const a = toNumber(r.a);
        const b = toNumber(r.b);
        if (r.part === "queue") sample.queues.push({ key: String(r.key), depth: a });
        else if (r.part === "timers") [sample.timersDue, sample.timerLagSeconds] = [a, Math.max(0, b)];
        else if (r.part === "outbox") [sample.outboxPending, sample.outboxLagSeconds] = [a, Math.max(0, b)];
        else if (r.part === "dead") sample.deadLetters = { invalid: a, expired: b };
        else if (r.part === "quarantined") sample.quarantined = a;
      }
      return sample;
    },
  };
}
