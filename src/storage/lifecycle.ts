/**
 * Instance links and ends that are not a step's own conclusion: child
 * outcomes delivered to a waiting parent, the children a cancellation takes
 * along, workflow deadlines, parked instances.
 *
 * Lock order, everywhere: a parent's row before its child's. A child that
 * concludes locks its parent first (`lockInstanceRow`), then concludes; a
 * parent that registers a child wait locks its own row, then reads the
 * child. So a child's outcome is either seen by the parent's wait
 * registration or delivered to the registered wait — never neither.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { historyValues } from "./history.ts";
import { makeRunnable, resolveWaits } from "./transitions.ts";
import { DB_NOW, inBody, WAITING } from "./rows.ts";
import { CANCELLABLE_STATUSES, type InstanceStatus, type NewHistoryEvent } from "./records.ts";

export interface ChildSummary {
  instanceId: string;
  workflowName: string;
  status: InstanceStatus;
  detached: boolean;
}

/** Parent and child links, workflow deadlines, parked instances. */
export interface LifecycleArea {
  /** Lock an instance row (FOR UPDATE, in a transaction): a parent before its child. */
  lockInstanceRow(instanceId: string): Promise<{ status: InstanceStatus; currentActivityId: string | null } | null>;
  /** Record a child's outcome in its parent if the parent waits on `activityId` (the parent becomes running). */
  recordChildOutcome(parentId: string, activityId: string, event: NewHistoryEvent): Promise<boolean>;
  /** Children a parent's cancellation takes along (not detached, cancellable). */
  listCancellableChildren(parentId: string): Promise<string[]>;
  listChildren(parentId: string, limit: number): Promise<ChildSummary[]>;
  /** Cancellable instances whose deadline passed (bounded). */
  findExpiredDeadlines(limit: number): Promise<string[]>;
  /** Parked instances of a workflow that diverged from other code than `currentHash` → running; their ids. */
  unparkInstances(current: readonly { workflowName: string; hash: string }[], limit: number): Promise<string[]>;
  /** One parked instance → running; false when it is not parked. */
  resumeParked(instanceId: string): Promise<boolean>;
}

const CANCELLABLE = sql.raw(CANCELLABLE_STATUSES.map((s) => `'${s}'`).join(", "));

export function lifecycleArea(ex: Executor): LifecycleArea {
  return {
    /** `SELECT … FOR UPDATE` of one instance row: its status and current activity, or null when it does not exist. */
    async lockInstanceRow(instanceId) {
      const [row] = await queryRows<{ status: string; current_activity_id: string | null }>(
        ex,
        sql`SELECT status, current_activity_id FROM workflow_instances WHERE instance_id = ${instanceId} FOR UPDATE`,
      );
      return row ? { status: row.status as InstanceStatus, currentActivityId: row.current_activity_id } : null;
    },

    /**
     * Record a child's outcome in its parent when the parent waits for exactly
     * that child (a child wait at `activityId`): the history row and
     * `running` in one statement. False when the parent does not wait for it
     * (its own wait registration will read the child's row instead).
     */
    async recordChildOutcome(parentId, activityId, event) {
      const rows = await queryRows(
        ex,
        resolveWaits({
          bound: sql`SELECT ${parentId}::text AS instance_id, v.activity_id AS wait_id, v.ord, v.event_type, v.data_type, v.event_data, v.event_data_binary
            FROM ${historyValues([event])}`,
          stillWaiting: sql`i.status = ${WAITING.child} AND i.current_activity_id = b.wait_id`,
          record: "woken",
          onConflict: "error",
          result: sql`SELECT instance_id FROM woken`,
        }),
      );
      return rows.length > 0;
    },

    /** Children of `parentId` that its cancellation takes along: not detached, still cancellable. */
    async listCancellableChildren(parentId) {
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`SELECT instance_id FROM workflow_instances
            WHERE parent_instance_id = ${parentId} AND NOT detached AND status IN (${CANCELLABLE}) AND ${inBody("workflow_instances")}
            ORDER BY started_at, instance_id`,
      );
      return rows.map((r) => r.instance_id);
    },

    /** Every child of `parentId`, oldest first (for views): id, workflow, status, detached. */
    async listChildren(parentId, limit) {
      const rows = await queryRows<{ instance_id: string; workflow_name: string; status: string; detached: unknown }>(
        ex,
        sql`SELECT instance_id, workflow_name, status, detached FROM workflow_instances
            WHERE parent_instance_id = ${parentId} ORDER BY started_at, instance_id LIMIT ${limit}::int`,
      );
      return rows.map((r) => ({ instanceId: r.instance_id, workflowName: r.workflow_name, status: r.status as InstanceStatus, detached: r.detached === true || r.detached === "t" }));
    },

    /** Instances whose deadline passed and that can still be ended (oldest deadline first, bounded). */
    async findExpiredDeadlines(limit) {
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`SELECT instance_id FROM workflow_instances
            WHERE deadline_at IS NOT NULL AND deadline_at <= ${DB_NOW} AND status IN (${CANCELLABLE}) AND ${inBody("workflow_instances")}
            ORDER BY deadline_at LIMIT ${limit}::int`,
      );
      return rows.map((r) => r.instance_id);
    },

    /**
     * Parked instances of the `current` workflows that diverged from code other
     * than their workflow's current hash go back to `running` (the deployed code
     * may replay them now); returns their ids (oldest first, `limit` in all). One
     * that still diverges is parked again under the new hash. One statement for
     * every workflow: the pairs travel as one JSON value, the same on each driver.
     */
    async unparkInstances(current, limit) {
      const pairs = JSON.stringify(current.map((c) => ({ workflow_name: c.workflowName, hash: c.hash })));
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`
        WITH current_code AS (
          SELECT workflow_name, hash FROM jsonb_to_recordset(${pairs}::jsonb) AS c(workflow_name text, hash text)
        ), due AS (
          SELECT p.instance_id FROM workflow_instances p JOIN current_code c ON c.workflow_name = p.workflow_name
          WHERE p.status = 'parked' AND p.parked_hash IS DISTINCT FROM c.hash
          ORDER BY p.updated_at LIMIT ${limit}::int
          FOR UPDATE OF p SKIP LOCKED
        )
        ${makeRunnable({ alias: "w", set: sql`parked_hash = NULL, error_data = NULL`, from: sql`due`, where: sql`w.instance_id = due.instance_id AND w.status = 'parked'`, returning: sql`w.instance_id` })}`,
      );
      return rows.map((r) => r.instance_id);
    },

    /** Explicit resume of one parked instance (an operator's decision); false when it is not parked. */
    async resumeParked(instanceId) {
      const rows = await queryRows(
        ex,
        makeRunnable({ set: sql`parked_hash = NULL, error_data = NULL`, where: sql`instance_id = ${instanceId} AND status = 'parked'`, returning: sql`1 AS ok` }),
      );
      return rows.length > 0;
    },
  };
}
