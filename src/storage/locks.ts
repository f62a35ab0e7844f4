/**
 * System locks: named leases in `system_locks` that keep concurrent sweepers
 * (cron invocations on several isolates) from running the same task at once.
 * Acquisition is one INSERT .. ON CONFLICT DO UPDATE whose WHERE re-checks the
 * current holder under the row lock, so of several racers exactly one wins;
 * an expired lock is taken over; the holder may re-acquire its own lock.
 * A release keeps `locked_at`, so a sweep task's row says when it last ran.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, dbNowPlus, toNullableDate } from "./rows.ts";

/** System locks: named, expiring leases for tasks one worker runs at a time. */
export interface LocksArea {
  tryAcquireSystemLock(name: string, holder: string, leaseSeconds: number): Promise<boolean>;
  renewSystemLock(name: string, holder: string, leaseSeconds: number): Promise<boolean>;
  releaseSystemLock(name: string, holder: string): Promise<void>;
  /**
   * When the lock was last taken (a release keeps `locked_at`): for a sweep task's lock, when the task
   * last ran; with `prefix`, the latest of every lock whose name starts with it. Null: never.
   */
  systemLockLastTaken(name: string, opts?: { prefix?: boolean }): Promise<Date | null>;
}

export function locksArea(ex: Executor): LocksArea {
  return {
    async tryAcquireSystemLock(name, holder, leaseSeconds) {
      const rows = await queryRows(
        ex,
        sql`INSERT INTO system_locks (lock_name, locked_by, locked_at, lock_expires_at)
            VALUES (${name}, ${holder}, ${DB_NOW}, ${dbNowPlus(leaseSeconds)})
            ON CONFLICT (lock_name) DO UPDATE
              SET locked_by = excluded.locked_by, locked_at = excluded.locked_at, lock_expires_at = excluded.lock_expires_at
              WHERE system_locks.locked_by IS NULL
                 OR system_locks.lock_expires_at IS NULL
                 OR system_locks.lock_expires_at < ${DB_NOW}
                 OR system_locks.locked_by = excluded.locked_by
            RETURNING 1 AS ok`,
      );
      return rows.length > 0;
    },

    /** Extends the lock only while `holder` still holds it (not expired). */
    async renewSystemLock(name, holder, leaseSeconds) {
      const rows = await queryRows(
        ex,
        sql`UPDATE system_locks SET lock_expires_at = ${dbNowPlus(leaseSeconds)}
            WHERE lock_name = ${name} AND locked_by = ${holder} AND lock_expires_at >= ${DB_NOW}
            RETURNING 1 AS ok`,
      );
      return rows.length > 0;
    },

    async releaseSystemLock(name, holder) {
      await ex.execute(sql`
        UPDATE system_locks SET locked_by = NULL, lock_expires_at = NULL
        WHERE lock_name = ${name} AND locked_by = ${holder}`);
    },

    async systemLockLastTaken(name, opts) {
      const rows = await queryRows<{ at: unknown }>(
        ex,
        opts?.prefix ? sql`SELECT max(locked_at) AS at FROM system_locks WHERE starts_with(lock_name, ${name})` : sql`SELECT locked_at AS at FROM system_locks WHERE lock_name = ${name}`,
      );
      return toNullableDate(rows[0]?.at ?? null);
    },
  };
}
