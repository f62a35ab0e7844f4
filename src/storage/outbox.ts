/**
 * Transactional outbox and CloudEvents dedupe.
 *
 * Outbox life cycle: pending → processing (claimed) → published | invalid |
 * failed (retried after its backoff) | expired. A claim stamps next_attempt_at
 * with a claim timeout, so the row of a relay that crashed mid-send becomes
 * claimable again; claims use SKIP LOCKED, so concurrent relays never get the
 * same row. The terminal marks of a send (failed / invalid) apply only to a row
 * still `processing`: a relay whose claim timed out and was re-claimed and
 * published by another cannot turn it back into `failed`.
 *
 * Dead letters (`invalid`, `expired`) stay until an operator acts: re-arming
 * puts one back to `pending` with its attempts reset and its age counted from
 * the re-arm (`rearmed_at`), discarding deletes it. Both are guarded by the
 * status in the statement itself, so of two concurrent re-arms exactly one
 * acts, and a row that is not a dead letter is never touched.
 */
import { sql, type SQL } from "drizzle-orm";
import { newestFirstPage } from "./cursor.ts";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, dbNowPlus, payloadParams, toOutbox, type Row } from "./rows.ts";
import { DEAD_LETTER_STATUSES, type DeadLetterStatus, type NewOutboxEvent, type OutboxRecord, type OutboxStatus } from "./records.ts";

export interface DeadLetterQuery {
  /** Default: both. */
  status?: DeadLetterStatus[];
  eventType?: string;
  /** 1..1000, default 50. */
  limit?: number;
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor?: string | null;
}

export interface DeadLetterPage {
  /** Newest first (created_at DESC, event_id DESC). */
  events: OutboxRecord[];
  nextCursor: string | null;
}

/** What an operator action on a dead letter found: the row's status before it (null: no such row), and whether it acted. */
export interface DeadLetterAction {
  previousStatus: OutboxStatus | null;
  done: boolean;
}

/** The transactional outbox, its dead letters, and CloudEvents dedupe. */
export interface OutboxArea {
  addOutboxEvent(event: NewOutboxEvent): Promise<void>;
  /** Claim due pending/failed rows (SKIP LOCKED), marking them `processing` so no one sends them twice. */
  claimOutboxEvents(limit: number, eventIds?: string[]): Promise<OutboxRecord[]>;
  markOutboxPublished(eventId: string): Promise<void>;
  markOutboxInvalid(eventId: string, error: string): Promise<void>;
  /** Back to `failed` with retry_count+1 and the next attempt `retryInSeconds` later. */
  markOutboxFailed(eventId: string, error: string, retryInSeconds: number): Promise<void>;
  /** A claimed row whose send never left (the invocation's subrequest limit): back to due, no attempt counted. */
  releaseOutboxClaim(eventId: string): Promise<void>;
  /** Pending/failed rows older than the max age (counted from a re-arm, if any) or out of attempts → `expired`. */
  expireOutboxEvents(olderThanSeconds: number, maxRetries: number): Promise<number>;
  /** A page of dead letters (`invalid`, `expired`), newest first. Bad cursor → InvalidArgumentError. */
  listDeadLetters(query: DeadLetterQuery): Promise<DeadLetterPage>;
  /** A dead letter back to `pending`, due now, attempts reset, its age counted from now; any other row is left as it is. */
  rearmOutboxEvent(eventId: string): Promise<DeadLetterAction>;
  /** Delete a dead letter; any other row is left as it is. */
  discardOutboxEvent(eventId: string): Promise<DeadLetterAction>;
  /** True the first time `(source, id)` is seen; `seen` is kept for the received-events view (received-events.ts). */
  recordCloudEvent(source: string, id: string, seen?: { type: string; time: string | null; messageId: string }): Promise<boolean>;
}

/** How long a claim protects a row before another relay may take it over. */
export const OUTBOX_CLAIM_TIMEOUT_SECONDS = 60;

const DEAD = sql.raw(DEAD_LETTER_STATUSES.map((s) => `'${s}'`).join(", "));

/** Run a status-guarded `action` on one row and report what it found (one statement). */
async function onDeadLetter(ex: Executor, eventId: string, action: SQL): Promise<DeadLetterAction> {
  const [row] = await queryRows<{ previous: string | null; done: boolean }>(
    ex,
    sql`WITH cur AS (SELECT status FROM outbox_events WHERE event_id = ${eventId}),
             act AS (${action} RETURNING 1 AS ok)
        SELECT (SELECT status FROM cur) AS previous, EXISTS (SELECT 1 FROM act) AS done`,
  );
  return { previousStatus: (row?.previous ?? null) as OutboxStatus | null, done: row?.done === true };
}

export function outboxArea(ex: Executor): OutboxArea {
  return {
    /** Idempotent by event id: adding the same event twice records it once. */
    async addOutboxEvent(e) {
      const p = payloadParams(e.data);
      await ex.execute(sql`
        INSERT INTO outbox_events (event_id, event_type, event_source, data_type, event_data, event_data_binary, content_type, extensions)
        VALUES (${e.eventId}, ${e.eventType}, ${e.eventSource}, ${p.dataType}, ${p.text}, ${p.binary},
                ${e.contentType ?? "application/json"}, ${e.extensions ?? null}::text)
        ON CONFLICT (event_id) DO NOTHING`);
    },

    async claimOutboxEvents(limit, eventIds) {
      if (eventIds && eventIds.length === 0) return [];
      const only: SQL = eventIds ? sql`AND event_id IN (${sql.join(eventIds.map((id) => sql`${id}`), sql`, `)})` : sql``;
      const rows = await queryRows<Row>(
        ex,
        sql`
        WITH due AS (
          SELECT event_id FROM outbox_events
          WHERE status IN ('pending', 'failed', 'processing') AND next_attempt_at <= ${DB_NOW} ${only}
          ORDER BY created_at, event_id
          LIMIT ${limit}::int
          FOR UPDATE SKIP LOCKED
        )
        UPDATE outbox_events o SET status = 'processing', next_attempt_at = ${dbNowPlus(OUTBOX_CLAIM_TIMEOUT_SECONDS)}
        FROM due WHERE o.event_id = due.event_id
        RETURNING o.*`,
      );
      return rows.map(toOutbox).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.eventId < b.eventId ? -1 : 1));
    },

    async markOutboxPublished(eventId) {
      await ex.execute(sql`
        UPDATE outbox_events SET status = 'published', published_at = ${DB_NOW}, last_error = NULL
        WHERE event_id = ${eventId} AND status <> 'published'`);
    },

    async markOutboxInvalid(eventId, error) {
      await ex.execute(sql`
        UPDATE outbox_events SET status = 'invalid', last_error = ${error}
        WHERE event_id = ${eventId} AND status = 'processing'`);
    },

    async markOutboxFailed(eventId, error, retryInSeconds) {
      await ex.execute(sql`
        UPDATE outbox_events SET status = 'failed', retry_count = retry_count + 1, last_error = ${error},
               next_attempt_at = ${dbNowPlus(retryInSeconds)}
        WHERE event_id = ${eventId} AND status = 'processing'`);
    },

    /** Undo a claim whose send never left (subrequest limit): no attempt counted, due again at once. */
    async releaseOutboxClaim(eventId) {
      await ex.execute(sql`
        UPDATE outbox_events SET status = CASE WHEN retry_count = 0 THEN 'pending' ELSE 'failed' END, next_attempt_at = ${DB_NOW}
        WHERE event_id = ${eventId} AND status = 'processing'`);
    },

    async expireOutboxEvents(olderThanSeconds, maxRetries) {
      const rows = await queryRows(
        ex,
        sql`UPDATE outbox_events SET status = 'expired'
            WHERE status IN ('pending', 'failed')
              AND (coalesce(rearmed_at, created_at) < ${DB_NOW} - make_interval(secs => ${olderThanSeconds}::float8) OR retry_count >= ${maxRetries}::int)
            RETURNING 1 AS ok`,
      );
      return rows.length;
    },

    async listDeadLetters(query) {
      const limit = Math.min(1000, Math.max(1, Math.trunc(query.limit ?? 50)));
      const statuses = (query.status ?? DEAD_LETTER_STATUSES).filter((s) => (DEAD_LETTER_STATUSES as readonly string[]).includes(s));
      if (statuses.length === 0) return { events: [], nextCursor: null };
      const where: SQL[] = [sql`status IN (${sql.join(statuses.map((s) => sql`${s}`), sql`, `)})`];
      if (query.eventType !== undefined) where.push(sql`event_type = ${query.eventType}`);
      const { rows, nextCursor } = await newestFirstPage(ex, { select: sql`* FROM outbox_events`, where, time: "created_at", id: "event_id", cursor: query.cursor, limit, what: "dead-letter list" });
      return { events: rows.map(toOutbox), nextCursor };
    },

    rearmOutboxEvent(eventId) {
      return onDeadLetter(
        ex,
        eventId,
        sql`UPDATE outbox_events SET status = 'pending', retry_count = 0, next_attempt_at = ${DB_NOW}, rearmed_at = ${DB_NOW}
            WHERE event_id = ${eventId} AND status IN (${DEAD})`,
      );
    },

    discardOutboxEvent(eventId) {
      return onDeadLetter(ex, eventId, sql`DELETE FROM outbox_events WHERE event_id = ${eventId} AND status IN (${DEAD})`);
    },

    /** True the first time `(source, id)` is seen. */
    async recordCloudEvent(source, id, seen) {
      const rows = await queryRows(
        ex,
        sql`INSERT INTO cloudevent_dedupe (source, event_id, event_type, event_time, message_id)
            VALUES (${source}, ${id}, ${seen?.type ?? null}::text, ${seen?.time ?? null}::text, ${seen?.messageId ?? null}::text)
            ON CONFLICT (source, event_id) DO NOTHING RETURNING 1 AS ok`,
      );
      return rows.length > 0;
    },
  };
}
