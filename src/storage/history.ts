/**
 * History (current run and archive), compensations and timers.
 *
 * History rows are unique per (instance, activity id): recording an outcome
 * twice is an error, except where a sweeper races a delivery for the same
 * activity id (timer firing), which records with ON CONFLICT DO NOTHING so the
 * first outcome wins.
 */
import { sql, type SQL } from "drizzle-orm";
import { expireDue, recordHistory } from "./transitions.ts";
import { queryRows, type Executor } from "./database.ts";
import { EV } from "../core/model.ts";
import { NOT_QUARANTINED } from "./failures.ts";
import {
  DB_NOW,
  dbNowPlus,
  isoUtc,
  payloadParams,
  toArchivedEvent,
  toCompensation,
  toHistoryEvent,
  toNullableDate,
  toNumber,
  tsParam,
  WAITING,
  type Row,
} from "./rows.ts";
import type {
  ArchivedHistoryEvent,
  CompensationRecord,
  HistoryEvent,
  NewCompensation,
  NewHistoryEvent,
  Payload,
  TimerRegistration,
} from "./records.ts";

export interface HistoryPage {
  events: HistoryEvent[];
  /** Pass as `afterId` for the next page; null when this page is the last. */
  nextAfterId: number | null;
}

/** A history entry for display: `data` is null when the payload is longer than the page asked for; `size` is its length. */
export interface HistoryPreview extends Omit<HistoryEvent, "data"> {
  data: Payload | null;
  size: number;
}

export interface HistoryPreviewPage {
  events: HistoryPreview[];
  nextAfterId: number | null;
}

/** The current run's history, archived runs, compensations and timers. */
export interface HistoryArea {
  appendHistory(instanceId: string, events: NewHistoryEvent[]): Promise<void>;
  loadHistory(instanceId: string): Promise<HistoryEvent[]>;
  /** How many entries the current run's history holds (what a cold step replays). */
  countHistory(instanceId: string): Promise<number>;
  /** One page of the current run's history, in order, after the row `afterId` (0: from the start). */
  loadHistoryPage(instanceId: string, afterId: number, limit: number): Promise<HistoryPage>;
  /** A page of history for display, payloads over `maxChars` left in the database (current run, or the archived `run`). */
  loadHistoryPreview(instanceId: string, opts: { afterId: number; limit: number; maxChars: number; run?: number }): Promise<HistoryPreviewPage>;
  loadArchivedHistory(instanceId: string, run?: number): Promise<ArchivedHistoryEvent[]>;
  addCompensations(instanceId: string, comps: NewCompensation[]): Promise<void>;
  /** Newest first (LIFO order). */
  listCompensations(instanceId: string): Promise<CompensationRecord[]>;
  registerTimer(instanceId: string, timer: TimerRegistration): Promise<void>;
  /**
   * Fire expired timers (bounded, SKIP LOCKED), in one transaction: record
   * `TimerExpired` for the timer's activity id, delete the timer, make the
   * instance `running` if it was waiting for that timer. Returns the instance ids.
   * Timers of quarantined instances wait (they fire once it is resumed).
   */
  fireExpiredTimers(limit: number, onlyInstanceId?: string): Promise<string[]>;
  /** Earliest pending timer expiry (for in-process wake-ups), or null. */
  nextTimerExpiry(): Promise<Date | null>;
}

/**
 * `(VALUES ...) AS v(ord, activity_id, event_type, data_type, event_data, event_data_binary)`
 * with explicit casts, `ord` keeping the caller's order (ids follow it).
 */
export function historyValues(events: NewHistoryEvent[]): SQL {
  const rows = events.map((e, i) => {
    const p = payloadParams(e.data);
    return sql`(${i}::int, ${e.activityId}::text, ${e.eventType}::text, ${p.dataType}, ${p.text}, ${p.binary})`;
  });
  return sql`(VALUES ${sql.join(rows, sql`, `)}) AS v(ord, activity_id, event_type, data_type, event_data, event_data_binary)`;
}

/** `(VALUES ...) AS c(ord, activity_id, activity_name, args)`. */
export function compensationValues(comps: NewCompensation[]): SQL {
  const rows = comps.map((c, i) => sql`(${i}::int, ${c.activityId}::text, ${c.activityName}::text, ${c.args}::text)`);
  return sql`(VALUES ${sql.join(rows, sql`, `)}) AS c(ord, activity_id, activity_name, args)`;
}

/** The absolute expiry of a timer registration as SQL. */
export function timerExpiry(timer: TimerRegistration): SQL {
  if (timer.expiresAt) return tsParam(timer.expiresAt);
  if (timer.delaySeconds !== undefined) return dbNowPlus(timer.delaySeconds);
  throw new TypeError(`timer ${timer.timerId}: expiresAt or delaySeconds is required`);
}

export function historyArea(ex: Executor): HistoryArea {
  return {
    async appendHistory(instanceId, events) {
      if (events.length === 0) return;
      await ex.execute(
        recordHistory(sql`SELECT ${instanceId}::text, v.activity_id, v.event_type, v.data_type, v.event_data, v.event_data_binary
        FROM ${historyValues(events)} ORDER BY v.ord`),
      );
    },

    async loadHistory(instanceId) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT id, activity_id, event_type, data_type, event_data, event_data_binary, created_at
            FROM workflow_history WHERE instance_id = ${instanceId} ORDER BY id`,
      );
      return rows.map(toHistoryEvent);
    },

    async countHistory(instanceId) {
      const [row] = await queryRows<Row>(ex, sql`SELECT count(*)::int AS n FROM workflow_history WHERE instance_id = ${instanceId}`);
      return toNumber(row?.n ?? 0);
    },

    async loadHistoryPage(instanceId, afterId, limit) {
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT id, activity_id, event_type, data_type, event_data, event_data_binary, created_at
            FROM workflow_history WHERE instance_id = ${instanceId} AND id > ${afterId}::bigint ORDER BY id LIMIT ${limit + 1}::int`,
      );
      const events = rows.slice(0, limit).map(toHistoryEvent);
      return { events, nextAfterId: rows.length > limit ? (events.at(-1)?.id ?? null) : null };
    },

    /**
     * A page of history for display (the viewer): a payload longer than
     * `maxChars` stays in the database — the row carries its size and no data —
     * so a page of huge values costs what a page of small ones does. `run`
     * reads an archived run instead of the current one.
     */
    async loadHistoryPreview(instanceId, opts) {
      const from = opts.run === undefined ? sql`workflow_history WHERE instance_id = ${instanceId}` : sql`workflow_history_archive WHERE instance_id = ${instanceId} AND run = ${opts.run}::int`;
      const max = opts.maxChars;
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT id, activity_id, event_type, data_type, created_at,
                   COALESCE(length(event_data), octet_length(event_data_binary), 0) AS size,
                   CASE WHEN length(event_data) > ${max}::int THEN NULL ELSE event_data END AS event_data,
                   CASE WHEN octet_length(event_data_binary) > ${max}::int THEN NULL ELSE event_data_binary END AS event_data_binary
            FROM ${from} AND id > ${opts.afterId}::bigint ORDER BY id LIMIT ${opts.limit + 1}::int`,
      );
      const events = rows.slice(0, opts.limit).map((r) => {
        const size = Number(r.size);
        if (size <= max) return { ...toHistoryEvent(r), size };
        const { data: _left, ...rest } = toHistoryEvent({ ...r, data_type: "json", event_data: "null" });
        return { ...rest, data: null, size };
      });
      return { events, nextAfterId: rows.length > opts.limit ? (events.at(-1)?.id ?? null) : null };
    },

    async loadArchivedHistory(instanceId, run) {
      const runFilter = run === undefined ? sql`` : sql`AND run = ${run}::int`;
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT id, run, activity_id, event_type, data_type, event_data, event_data_binary, created_at, archived_at
            FROM workflow_history_archive WHERE instance_id = ${instanceId} ${runFilter} ORDER BY run, id`,
      );
      return rows.map(toArchivedEvent);
    },

    async addCompensations(instanceId, comps) {
      if (comps.length === 0) return;
      // Unique per activity id: a registration replayed after a crash is recorded once.
      await ex.execute(sql`
        INSERT INTO workflow_compensations (instance_id, activity_id, activity_name, args)
        SELECT ${instanceId}::text, c.activity_id, c.activity_name, c.args FROM ${compensationValues(comps)} ORDER BY c.ord
        ON CONFLICT (instance_id, activity_id) DO NOTHING`);
    },

    async listCompensations(instanceId) {
      // id, not created_at: several registrations in one transaction share now().
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT id, activity_id, activity_name, args, created_at
            FROM workflow_compensations WHERE instance_id = ${instanceId} ORDER BY id DESC`,
      );
      return rows.map(toCompensation);
    },

    async registerTimer(instanceId, timer) {
      await ex.execute(sql`
        INSERT INTO workflow_timer_subscriptions (instance_id, timer_id, expires_at, activity_id)
        VALUES (${instanceId}, ${timer.timerId}, ${timerExpiry(timer)}, ${timer.activityId})
        ON CONFLICT (instance_id, timer_id) DO NOTHING`);
    },

    /**
     * One statement: lock a batch of due timers with their instance rows (SKIP
     * LOCKED, so a concurrent sweeper takes a disjoint batch, a timer deleted by
     * one is skipped by the other, and a timer whose instance a cancel or a step
     * holds waits for the next sweep instead of deadlocking with it: instance
     * rows are locked before timer rows everywhere), delete them, record
     * `TimerExpired` and make waiting instances runnable (a race of a webhook
     * and a timer too: a POST that won deleted the timer under the same lock).
     */
    async fireExpiredTimers(limit, onlyInstanceId) {
      const only = onlyInstanceId === undefined ? sql`` : sql`AND t.instance_id = ${onlyInstanceId}`;
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        expireDue({
          due: sql`SELECT t.id, t.instance_id, t.timer_id, coalesce(t.activity_id, t.timer_id) AS activity_id, t.expires_at
            FROM workflow_timer_subscriptions t JOIN workflow_instances i ON i.instance_id = t.instance_id
            WHERE t.expires_at <= ${DB_NOW} ${only} AND i.status <> 'quarantined'
            ORDER BY t.expires_at, t.id
            LIMIT ${limit}::int
            FOR UPDATE OF i, t SKIP LOCKED`,
          withdraw: sql`DELETE FROM workflow_timer_subscriptions t USING due WHERE t.id = due.id`,
          eventType: EV.TimerExpired,
          data: sql`json_build_object('timer_id', timer_id, 'expired_at', ${isoUtc(sql`expires_at`)})`,
          order: sql`expires_at, id`,
          own: "timers",
          // A race of a webhook and a timer waits for the webhook with its timer registered at the race's id.
          stillWaiting: sql`(i.status = ${WAITING.timer} OR (i.status = ${WAITING.webhook} AND i.current_activity_id = b.wait_id))`,
        }),
      );
      return rows.map((r) => r.instance_id);
    },

    async nextTimerExpiry() {
      const [row] = await queryRows<Row>(ex, sql`SELECT min(expires_at) AS next FROM workflow_timer_subscriptions t WHERE ${NOT_QUARANTINED("t")}`);
      return toNullableDate(row?.next);
    },
  };
}
