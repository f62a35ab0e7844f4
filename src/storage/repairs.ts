/**
 * Repairs (engine/repairs.ts, engine/bulk.ts): copying a history prefix into a
 * fork, and the rows of bulk operations. A bulk operation is worked through
 * in instance-id order; each batch runs in one transaction that holds the
 * operation's row (FOR UPDATE SKIP LOCKED: a racing worker skips it, a worker
 * killed mid-batch releases it with the batch rolled back) and moves the
 * cursor and the counters with the batch's effects.
 */
import { sql, type SQL } from "drizzle-orm";
import { recordHistory } from "./transitions.ts";
import { queryRows, type Executor } from "./database.ts";
import { instanceFilter } from "./instances.ts";
import { DB_NOW, toDate, toNumber, tsParam, type Row } from "./rows.ts";
import type { InstanceFilter, InstanceStatus } from "./records.ts";

export type BulkAction = "cancel" | "resume" | "rerun" | "upgrade";

/** The list filters a bulk operation matches instances by. */
export interface BulkFilter extends InstanceFilter {
  status?: InstanceStatus[];
}

export interface BulkOperationRecord {
  operationId: string;
  action: BulkAction;
  filter: BulkFilter;
  status: "running" | "completed";
  total: number;
  done: number;
  skipped: number;
  failed: number;
  cursor: string | null;
  snapshotAt: Date;
  /** The latest failures, newest last (at most BULK_ERRORS_KEPT). */
  errors: { instanceId: string; error: string }[];
  createdAt: Date;
  updatedAt: Date;
}

export interface BulkProgress {
  cursor: string | null;
  done: number;
  skipped: number;
  failed: number;
  /** The operation's whole error list after this batch. */
  errors: { instanceId: string; error: string }[];
  finished: boolean;
}

export const BULK_ERRORS_KEPT = 20;

export interface RepairsArea {
  /**
   * Copy the current run's history of `from` before event `beforeEventId`
   * into `to` (which has none yet), in order, and the compensations `from`
   * registered at the activities copied. Returns how many events were copied.
   */
  copyHistoryPrefix(from: string, to: string, beforeEventId: number): Promise<number>;
  /** Insert; an existing id returns the stored row with created=false. */
  createBulkOperation(op: { operationId: string; action: BulkAction; filter: BulkFilter; total: number }): Promise<{ created: boolean; operation: BulkOperationRecord }>;
  getBulkOperation(operationId: string): Promise<BulkOperationRecord | null>;
  /** Newest first. */
  listBulkOperations(limit: number): Promise<BulkOperationRecord[]>;
  /** Ids of running operations, oldest first. */
  runningBulkOperations(limit: number): Promise<string[]>;
  /** In a transaction: the running operation's row, locked (null when another holds it or it is not running). */
  claimBulkOperation(operationId: string): Promise<BulkOperationRecord | null>;
  /** The next instances the operation matches after its cursor, in id order. */
  bulkBatch(op: BulkOperationRecord, limit: number): Promise<string[]>;
  /**
   * Move a claimed operation on: its cursor, counters added, its error list replaced (the latest kept), completed when
   * `finished` — and then `total` becomes done + skipped + failed: the instances it took, without those another operation
   * (or the instance itself) moved out of the filter first.
   */
  advanceBulkOperation(operationId: string, progress: BulkProgress): Promise<void>;
}

const filterJson = (f: BulkFilter) =>
  JSON.stringify({
    ...(f.workflowName !== undefined ? { workflowName: f.workflowName } : {}),
    ...(f.status !== undefined ? { status: f.status } : {}),
    ...(f.startedAfter ? { startedAfter: f.startedAfter.toISOString() } : {}),
    ...(f.startedBefore ? { startedBefore: f.startedBefore.toISOString() } : {}),
    ...(f.search !== undefined ? { search: f.search } : {}),
    ...(f.deployment !== undefined ? { deployment: f.deployment } : {}),
  });

function parseFilter(text: string): BulkFilter {
  const f = JSON.parse(text) as { workflowName?: string; status?: InstanceStatus[]; startedAfter?: string; startedBefore?: string; search?: string; deployment?: string };
  return {
    ...(f.workflowName !== undefined ? { workflowName: f.workflowName } : {}),
    ...(f.status !== undefined ? { status: f.status } : {}),
    ...(f.startedAfter ? { startedAfter: new Date(f.startedAfter) } : {}),
    ...(f.startedBefore ? { startedBefore: new Date(f.startedBefore) } : {}),
    ...(f.search !== undefined ? { search: f.search } : {}),
    ...(f.deployment !== undefined ? { deployment: f.deployment } : {}),
  };
}

const OP_COLUMNS = sql.raw("operation_id, action, filter, status, total, done, skipped, failed, cursor, snapshot_at, errors, created_at, updated_at");

function toOperation(r: Row): BulkOperationRecord {
  return {
    operationId: String(r.operation_id),
    action: String(r.action) as BulkAction,
    filter: parseFilter(String(r.filter)),
    status: String(r.status) as BulkOperationRecord["status"],
    total: toNumber(r.total),
    done: toNumber(r.done),
    skipped: toNumber(r.skipped),
    failed: toNumber(r.failed),
    cursor: r.cursor === null || r.cursor === undefined ? null : String(r.cursor),
    snapshotAt: toDate(r.snapshot_at),
    errors: JSON.parse(String(r.errors)) as BulkOperationRecord["errors"],
    createdAt: toDate(r.created_at),
    updatedAt: toDate(r.updated_at),
  };
}

export function repairsArea(ex: Executor): RepairsArea {
  const get = async (operationId: string, lock: SQL = sql``) => {
    const [row] = await queryRows<Row>(ex, sql`SELECT ${OP_COLUMNS} FROM bulk_operations WHERE operation_id = ${operationId} ${lock}`);
    return row ? toOperation(row) : null;
  };
  return {
    async copyHistoryPrefix(from, to, beforeEventId) {
      const rows = await queryRows<{ n: unknown }>(
        ex,
        sql`WITH copied AS (
              ${recordHistory(
                sql`SELECT ${to}::text, activity_id, event_type, data_type, event_data, event_data_binary, created_at
                FROM workflow_history WHERE instance_id = ${from} AND id < ${beforeEventId}::bigint ORDER BY id`,
                { createdAt: true },
              )}
              RETURNING activity_id
            )
            SELECT count(*)::int AS n FROM copied`,
      );
      // Compensations registered at the copied activities: the fork's replay reuses their results, so it would not register them again.
      await ex.execute(sql`
        INSERT INTO workflow_compensations (instance_id, activity_id, activity_name, args)
        SELECT ${to}::text, c.activity_id, c.activity_name, c.args FROM workflow_compensations c
        WHERE c.instance_id = ${from}
          AND c.activity_id IN (SELECT activity_id FROM workflow_history WHERE instance_id = ${from} AND id < ${beforeEventId}::bigint)
        ORDER BY c.id
        ON CONFLICT DO NOTHING`);
      return toNumber(rows[0]?.n ?? 0);
    },

    async createBulkOperation(op) {
      const [row] = await queryRows<Row>(
        ex,
        sql`INSERT INTO bulk_operations (operation_id, action, filter, total, snapshot_at)
            VALUES (${op.operationId}, ${op.action}, ${filterJson(op.filter)}, ${op.total}::int, ${DB_NOW})
            ON CONFLICT (operation_id) DO NOTHING
            RETURNING ${OP_COLUMNS}`,
      );
      if (row) return { created: true, operation: toOperation(row) };
      const existing = await get(op.operationId);
      if (!existing) throw new Error(`createBulkOperation(${op.operationId}): neither inserted nor found`);
      return { created: false, operation: existing };
    },

    getBulkOperation: (operationId) => get(operationId),

    async listBulkOperations(limit) {
      const rows = await queryRows<Row>(ex, sql`SELECT ${OP_COLUMNS} FROM bulk_operations ORDER BY created_at DESC, operation_id DESC LIMIT ${limit}::int`);
      return rows.map(toOperation);
    },

    async runningBulkOperations(limit) {
      const rows = await queryRows<{ operation_id: string }>(ex, sql`SELECT operation_id FROM bulk_operations WHERE status = 'running' ORDER BY created_at LIMIT ${limit}::int`);
      return rows.map((r) => r.operation_id);
    },

    claimBulkOperation: async (operationId) => {
      const op = await get(operationId, sql`AND status = 'running' FOR UPDATE SKIP LOCKED`);
      return op;
    },

    async bulkBatch(op, limit) {
      const where = instanceFilter(op.filter);
      if (op.filter.status !== undefined) {
        if (op.filter.status.length === 0) return [];
        where.push(sql`status IN (${sql.join(op.filter.status.map((s) => sql`${s}`), sql`, `)})`);
      }
      where.push(sql`started_at <= ${tsParam(op.snapshotAt)}`);
      if (op.cursor !== null) where.push(sql`instance_id > ${op.cursor}`);
      // FOR UPDATE (not SKIP LOCKED): an instance another operation (or a step) is changing is waited for and its
      // row checked again, so one that no longer matches is not this operation's — each instance is counted by the
      // one operation that acted on it, and a locked one is never passed over uncounted. Rows are locked in id order
      // by every operation, so two batches never wait on each other in a circle.
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`SELECT instance_id FROM workflow_instances WHERE ${sql.join(where, sql` AND `)} ORDER BY instance_id LIMIT ${limit}::int FOR UPDATE`,
      );
      return rows.map((r) => r.instance_id);
    },

    async advanceBulkOperation(operationId, p) {
      await ex.execute(sql`
        UPDATE bulk_operations SET
          cursor = ${p.cursor}::text,
          done = done + ${p.done}::int, skipped = skipped + ${p.skipped}::int, failed = failed + ${p.failed}::int,
          errors = ${JSON.stringify(p.errors.slice(-BULK_ERRORS_KEPT))},
          status = ${p.finished ? "completed" : "running"}::text,
          total = CASE WHEN ${p.finished}::boolean THEN done + skipped + failed + ${p.done + p.skipped + p.failed}::int ELSE total END,
          updated_at = ${DB_NOW}
        WHERE operation_id = ${operationId}`);
    },
  };
}
