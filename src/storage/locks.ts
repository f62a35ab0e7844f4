/**
 * System locks: named leases in `system_locks` that keep concurrent sweepers
 * (cron invocations on several isolates) from running the same task at once.
 * Acquisition is one INSERT .. ON CONFLICT DO UPDATE whose WHERE re-checks the
 * current holder under the row lock, so of several racers exactly one wins;
 * an expired lock is taken over; the holder may re-acquire its own lock.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, dbNowPlus } from "./rows.ts";

/** System locks: named, expiring leases for tasks one worker runs at a time. */
export interface LocksArea {
  tryAcquireSystemLock(name: string, holder: string, leaseSeconds: number): Promise<boolean>;
  renewSystemLock(name: string, holder: string, leaseSeconds: number): Promise<boolean>;
  releaseSystemLock(name: string, holder: string): Promise<void>;
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
        UPDATE system_locks SET locked_by = NULL, locked_at = NULL, lock_expires_at = NULL
        WHERE lock_name = ${name} AND locked_by = ${holder}`);
    },
  };
}
