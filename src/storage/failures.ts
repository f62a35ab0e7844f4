/**
 * Poison isolation and retention, storage side.
 *
 * A failure of work on an instance that is not a step's ordinary outcome — a
 * step that threw, a timer, delivery or purge that could not be recorded — is
 * counted on the instance row (`failure_count`, the latest in `failure_data`).
 * At the limit a live instance is set aside as `quarantined`: no task picks it
 * any more (not runnable, its timers and waits are skipped, not purged), so it
 * can never block other rows; an operator resumes it (back to the status it
 * had, its timers and waits kept) or cancels it. Every concluded step resets
 * the count, so only failures in a row count.
 *
 * Retention deletes finished instances with everything they own (the foreign
 * keys cascade: history, archived runs, compensations, subscriptions, claims)
 * and old CloudEvent dedupe rows, in bounded batches with SKIP LOCKED.
 */
import { sql, type SQL } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, isoUtc } from "./rows.ts";
import type { ExpiryTask } from "../core/model.ts";
import { TERMINAL_STATUSES, type Fence, type InstanceStatus } from "./records.ts";

/** Where work on an instance failed: a step, or a sweep task that picked it (a wait kind's expiry task, core/model.ts, or another). */
export type FailureTask = "step" | ExpiryTask | "channel_delivery" | "retention";

/** A failure to count against an instance (poison isolation). */
export interface InstanceFailure {
  task: FailureTask;
  errorType: string;
  message: string;
  /**
   * Failures in a row after which the instance is set aside (`quarantined`);
   * for a finished instance (retention) it is only left out of the task.
   */
  maxFailures: number;
  /** A step's failure: counted only while this lease holds, and the lease is released. */
  fence?: Fence;
}

/** Poison isolation (failure counts, quarantine) and retention. */
export interface FailuresArea {
  /**
   * Count a failure against an instance, in one statement: failure count + 1,
   * the failure stored, the lease released (a step's, fenced) — and at
   * `maxFailures` a live instance becomes `quarantined` (token bumped, so no
   * in-flight work on it commits). Returns the instance's status and count
   * after, or null when the guard did not match (lease lost, finished,
   * already quarantined, or held by a live step).
   */
  recordInstanceFailure(instanceId: string, failure: InstanceFailure): Promise<{ status: InstanceStatus; failureCount: number } | null>;
  /**
   * An operator's retry of a quarantined instance: back to the status it had
   * (its timers and waits were kept), count reset. False unless quarantined.
   */
  resumeQuarantined(instanceId: string): Promise<{ ok: boolean; status: InstanceStatus } | null>;
  /** Instances with a due timer or an expired message wait, for the one-at-a-time fallback (no locks taken). */
  findDueInstances(kind: "timers" | "message_timeouts", limit: number): Promise<string[]>;
  /**
   * Delete finished instances past the retention (history, archived runs,
   * compensations, timers, subscriptions, claims go with them), bounded,
   * SKIP LOCKED; instances whose purge kept failing are left out. Returns the ids.
   */
  purgeFinishedInstances(olderThanSeconds: number, limit: number, opts?: { onlyInstanceId?: string; maxFailures?: number }): Promise<string[]>;
  /** Finished instances the purge would take (read-only), for the one-at-a-time fallback. */
  findPurgeableInstances(olderThanSeconds: number, limit: number, maxFailures?: number): Promise<string[]>;
  /** Delete CloudEvent dedupe rows older than the retention (bounded). */
  purgeCloudEventDedupe(olderThanSeconds: number, limit: number): Promise<number>;
}

const TERMINAL = sql.raw(TERMINAL_STATUSES.map((s) => `'${s}'`).join(", "));

/** SQL condition: the instance owning `alias`'s row is not quarantined. */
export function NOT_QUARANTINED(alias: string): SQL {
  return sql`NOT EXISTS (SELECT 1 FROM workflow_instances qi WHERE qi.instance_id = ${sql.raw(alias)}.instance_id AND qi.status = 'quarantined')`;
}

const cutoff = (seconds: number) => sql`(${DB_NOW} - make_interval(secs => ${seconds}::float8))`;

function purgeable(olderThanSeconds: number, maxFailures: number): SQL {
  return sql`status IN (${TERMINAL}) AND updated_at < ${cutoff(olderThanSeconds)} AND failure_count < ${maxFailures}::int`;
}

export function failuresArea(ex: Executor): FailuresArea {
  return {
    async recordInstanceFailure(instanceId, f) {
      const finished = f.task === "retention";
      // A step's failure is fenced by its lease; a sweep task's needs the instance free of a live step (and alive, or finished for retention).
      const guard = f.fence
        ? sql`locked_by = ${f.fence.workerId} AND lock_token = ${f.fence.token}::bigint`
        : finished
          ? sql`status IN (${TERMINAL})`
          : sql`status NOT IN (${TERMINAL}, 'quarantined') AND (locked_by IS NULL OR lock_expires_at < ${DB_NOW})`;
      const setAside = finished ? sql`false` : sql`failure_count + 1 >= ${f.maxFailures}::int`;
      const [row] = await queryRows<{ status: string; failure_count: unknown }>(
        ex,
        sql`
        UPDATE workflow_instances SET
          failure_count = failure_count + 1,
          failure_data = json_build_object(
            'task', ${f.task}::text, 'error_type', ${f.errorType.slice(0, 200)}::text, 'message', ${f.message.slice(0, 2000)}::text,
            'at', ${isoUtc(DB_NOW)}, 'attempts', failure_count + 1,
            'previous_status', CASE WHEN ${setAside} THEN status END)::text,
          status = CASE WHEN ${setAside} THEN 'quarantined' ELSE status END,
          locked_by = CASE WHEN ${f.fence ? sql`true` : setAside} THEN NULL ELSE locked_by END,
          locked_at = CASE WHEN ${f.fence ? sql`true` : setAside} THEN NULL ELSE locked_at END,
          lock_expires_at = CASE WHEN ${f.fence ? sql`true` : setAside} THEN NULL ELSE lock_expires_at END,
          lock_token = lock_token + 1${finished ? sql`` : sql`, updated_at = ${DB_NOW}`}
        WHERE instance_id = ${instanceId} AND ${guard}
        RETURNING status, failure_count`,
      );
      return row ? { status: row.status as InstanceStatus, failureCount: Number(row.failure_count) } : null;
    },

    async resumeQuarantined(instanceId) {
      const [row] = await queryRows<{ current: string; resumed: string | null }>(
        ex,
        sql`
        WITH cur AS (SELECT status FROM workflow_instances WHERE instance_id = ${instanceId}),
        upd AS (
          UPDATE workflow_instances SET
            status = coalesce(failure_data::json ->> 'previous_status', 'running'),
            failure_count = 0, lock_token = lock_token + 1,
            locked_by = NULL, locked_at = NULL, lock_expires_at = NULL, updated_at = ${DB_NOW}
          WHERE instance_id = ${instanceId} AND status = 'quarantined'
          RETURNING status
        )
        SELECT cur.status AS current, upd.status AS resumed FROM cur LEFT JOIN upd ON true`,
      );
      if (!row) return null;
      return row.resumed !== null ? { ok: true, status: row.resumed as InstanceStatus } : { ok: false, status: row.current as InstanceStatus };
    },

    async findDueInstances(kind, limit) {
      const query =
        kind === "timers"
          ? sql`SELECT t.instance_id, min(t.expires_at) AS due FROM workflow_timer_subscriptions t
                WHERE t.expires_at <= ${DB_NOW} AND ${NOT_QUARANTINED("t")} GROUP BY t.instance_id ORDER BY due LIMIT ${limit}::int`
          : sql`SELECT s.instance_id, min(s.timeout_at) AS due FROM channel_subscriptions s
                WHERE s.activity_id IS NOT NULL AND s.timeout_at <= ${DB_NOW} AND ${NOT_QUARANTINED("s")} GROUP BY s.instance_id ORDER BY due LIMIT ${limit}::int`;
      const rows = await queryRows<{ instance_id: string }>(ex, query);
      return rows.map((r) => r.instance_id);
    },

    async purgeFinishedInstances(olderThanSeconds, limit, opts = {}) {
      const only = opts.onlyInstanceId === undefined ? sql`` : sql`AND instance_id = ${opts.onlyInstanceId}`;
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`
        WITH old AS (
          SELECT instance_id FROM workflow_instances
          WHERE ${purgeable(olderThanSeconds, opts.maxFailures ?? 2 ** 30)} ${only}
          ORDER BY updated_at, instance_id
          LIMIT ${limit}::int
          FOR UPDATE SKIP LOCKED
        )
        DELETE FROM workflow_instances w USING old WHERE w.instance_id = old.instance_id RETURNING w.instance_id`,
      );
      return rows.map((r) => r.instance_id);
    },

    async findPurgeableInstances(olderThanSeconds, limit, maxFailures = 2 ** 30) {
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`SELECT instance_id FROM workflow_instances WHERE ${purgeable(olderThanSeconds, maxFailures)}
            ORDER BY updated_at, instance_id LIMIT ${limit}::int`,
      );
      return rows.map((r) => r.instance_id);
    },

    async purgeCloudEventDedupe(olderThanSeconds, limit) {
      const rows = await queryRows(
        ex,
        sql`
        WITH old AS (
          SELECT source, event_id FROM cloudevent_dedupe WHERE received_at < ${cutoff(olderThanSeconds)}
          ORDER BY received_at LIMIT ${limit}::int FOR UPDATE SKIP LOCKED
        )
        DELETE FROM cloudevent_dedupe d USING old WHERE d.source = old.source AND d.event_id = old.event_id RETURNING 1 AS ok`,
      );
      return rows.length;
    },
  };
}
