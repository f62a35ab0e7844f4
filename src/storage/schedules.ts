/**
 * Schedule rows (`workflow_schedules`): registration, claiming a due row, and
 * moving it on. Claim and move happen in the caller's transaction together
 * with the start of the tick's instance, so a tick is started and recorded
 * atomically; concurrent sweeps skip a row another holds (SKIP LOCKED).
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, toDate, toNullableDate, tsParam, type Row } from "./rows.ts";

export interface ScheduleRegistration {
  workflowName: string;
  cron: string;
  timezone: string;
  missed: "skip" | "latest";
  /** The first tick after now (null: never). */
  nextRunAt: Date | null;
}

export interface DueSchedule {
  workflowName: string;
  nextRunAt: Date;
  /** The database's clock when the row was claimed. */
  now: Date;
}

export interface ScheduleRecord {
  workflowName: string;
  cron: string;
  timezone: string;
  missed: "skip" | "latest";
  nextRunAt: Date | null;
  lastRunAt: Date | null;
  lastInstanceId: string | null;
  /** When an operator paused it; null while it ticks. */
  pausedAt: Date | null;
}

/** Cron schedules: registration, claiming due ticks, advancing. */
export interface SchedulesArea {
  /** Upsert schedule rows; a changed cron/time zone/policy resets the next run, an unchanged row is not written. */
  registerSchedules(regs: ScheduleRegistration[]): Promise<void>;
  /** In a transaction: due rows of these workflows, FOR UPDATE SKIP LOCKED. */
  claimDueSchedules(workflowNames: string[], limit: number): Promise<DueSchedule[]>;
  advanceSchedule(workflowName: string, next: Date | null, ran: { at: Date; instanceId: string } | null): Promise<void>;
  listSchedules(workflowNames: string[]): Promise<ScheduleRecord[]>;
  /** Stop the row from being claimed (idempotent); false when there is no such row. */
  pauseSchedule(workflowName: string): Promise<boolean>;
  /** Claimable again from `nextRunAt` (ticks missed while paused are not started); false when there is no such row. */
  resumeSchedule(workflowName: string, nextRunAt: Date | null): Promise<boolean>;
}

export function schedulesArea(ex: Executor): SchedulesArea {
  return {
    /**
     * Upsert the registered schedules in one statement. A row whose cron,
     * time zone or policy changed gets the new next run; an unchanged row is not
     * written (so its next run and history stay).
     */
    async registerSchedules(regs) {
      if (regs.length === 0) return;
      const rows = regs.map((r) => ({ name: r.workflowName, cron: r.cron, timezone: r.timezone, missed: r.missed, next: r.nextRunAt?.toISOString() ?? null }));
      await ex.execute(sql`
        INSERT INTO workflow_schedules AS s (workflow_name, cron, timezone, missed, next_run_at)
        SELECT name, cron, timezone, missed, next::timestamptz
        FROM json_to_recordset(${JSON.stringify(rows)}::json) AS r(name text, cron text, timezone text, missed text, next text)
        ON CONFLICT (workflow_name) DO UPDATE
          SET cron = excluded.cron, timezone = excluded.timezone, missed = excluded.missed,
              next_run_at = excluded.next_run_at, updated_at = ${DB_NOW}
          WHERE (s.cron, s.timezone, s.missed) IS DISTINCT FROM (excluded.cron, excluded.timezone, excluded.missed)`);
    },

    /** Due rows of these workflows, locked for the caller's transaction (others are skipped), with the database's now. */
    async claimDueSchedules(workflowNames, limit) {
      if (workflowNames.length === 0) return [];
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT workflow_name, next_run_at, ${DB_NOW} AS db_now FROM workflow_schedules
            WHERE workflow_name IN (${sql.join(workflowNames.map((n) => sql`${n}`), sql`, `)})
              AND next_run_at <= ${DB_NOW}
              AND paused_at IS NULL
            ORDER BY next_run_at
            LIMIT ${limit}::int
            FOR UPDATE SKIP LOCKED`,
      );
      return rows.map((r) => ({ workflowName: String(r.workflow_name), nextRunAt: toDate(r.next_run_at), now: toDate(r.db_now) }));
    },

    /** Move a claimed row on; `ran` when an instance was started for a tick. */
    async advanceSchedule(workflowName, next, ran) {
      await ex.execute(sql`
        UPDATE workflow_schedules SET next_run_at = ${next ? tsParam(next) : sql`NULL`}, updated_at = ${DB_NOW}
          ${ran ? sql`, last_run_at = ${tsParam(ran.at)}, last_instance_id = ${ran.instanceId}` : sql``}
        WHERE workflow_name = ${workflowName}`);
    },

    async listSchedules(workflowNames) {
      if (workflowNames.length === 0) return [];
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT workflow_name, cron, timezone, missed, next_run_at, last_run_at, last_instance_id, paused_at FROM workflow_schedules
            WHERE workflow_name IN (${sql.join(workflowNames.map((n) => sql`${n}`), sql`, `)})
            ORDER BY workflow_name`,
      );
      return rows.map((r) => ({
        workflowName: String(r.workflow_name),
        cron: String(r.cron),
        timezone: String(r.timezone),
        missed: String(r.missed) as ScheduleRecord["missed"],
        nextRunAt: toNullableDate(r.next_run_at),
        lastRunAt: toNullableDate(r.last_run_at),
        lastInstanceId: r.last_instance_id === null || r.last_instance_id === undefined ? null : String(r.last_instance_id),
        pausedAt: toNullableDate(r.paused_at),
      }));
    },

    /*
     * A sweep that claimed the row before the pause committed finishes its tick (the
     * pause waits for its row lock); every claim after the commit sees paused_at
     * (FOR UPDATE re-reads the row's latest version), so no tick starts after it.
     */
    async pauseSchedule(workflowName) {
      const rows = await queryRows(ex, sql`UPDATE workflow_schedules SET paused_at = coalesce(paused_at, ${DB_NOW}), updated_at = ${DB_NOW} WHERE workflow_name = ${workflowName} RETURNING workflow_name`);
      return rows.length > 0;
    },

    async resumeSchedule(workflowName, nextRunAt) {
      const rows = await queryRows(
        ex,
        sql`UPDATE workflow_schedules SET
              next_run_at = CASE WHEN paused_at IS NULL THEN next_run_at ELSE ${nextRunAt ? tsParam(nextRunAt) : sql`NULL::timestamptz`} END,
              paused_at = NULL, updated_at = ${DB_NOW}
            WHERE workflow_name = ${workflowName} RETURNING workflow_name`,
      );
      return rows.length > 0;
    },
  };
}
