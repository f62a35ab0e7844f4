/**
 * Workflow definitions, instance creation/reading/listing and cancellation.
 *
 * Listing pages with a keyset cursor on (started_at, instance_id) (cursor.ts):
 * stable under concurrent inserts, no OFFSET scans.
 */
import { sql, type SQL } from "drizzle-orm";
import { newestFirstPage } from "./cursor.ts";
import { withdrawWaits } from "./transitions.ts";
import { queryRows, type Executor } from "./database.ts";
import { workflowDefinitions } from "./schema.ts";
import { DB_NOW, dbNowPlus, inBody, INSTANCE_COLUMNS, isoUtc, toInstance, tsParam, type Row } from "./rows.ts";
import { CANCELLABLE_STATUSES, LOCK_HELD_BY_END, type InstanceFilter, type InstanceRecord, type InstanceStatus } from "./records.ts";

/** How an instance is ended from outside its steps: cancelled by someone, or failed by its deadline. */
export type InstanceEnd = { kind: "cancel"; cancelledBy: string } | { kind: "timeout"; errorData: string };

export interface NewInstance {
  instanceId: string;
  workflowName: string;
  sourceHash: string;
  ownerService: string;
  inputData: string;
  lockTimeoutSeconds?: number | null;
  /** W3C traceparent of the span that started it (tracing on). */
  traceContext?: string | null;
  parentInstanceId?: string | null;
  parentActivityId?: string | null;
  detached?: boolean;
  /** Workflow timeout, from the database's now(). */
  timeoutSeconds?: number | null;
  /** `{workflow}:{key}` of a workflow with `concurrency`. */
  concurrencyKey?: string | null;
  /** `queued` when no concurrency slot or rate window had room, or while debounced (default `running`). */
  status?: "running" | "queued";
  /** `{workflow}:{key}` of a workflow with `rateLimit`; created `running`, it counts as admitted now. */
  rateKey?: string | null;
  /** `{workflow}:{key}` of a workflow with `singleton`. */
  singletonKey?: string | null;
  /** `{workflow}:{key}` of a workflow with `debounce`, created `queued`, due in `notBeforeSeconds`. */
  debounceKey?: string | null;
  notBeforeSeconds?: number | null;
  /** A rerun or fork of another instance (repairs.ts). */
  origin?: { instanceId: string; kind: "rerun" | "fork"; activityId: string | null } | null;
  /** Queued admission order within a flow-control key (default 0; higher first). */
  priority?: number;
  /** The deployment starting it (engine/deployment.ts). */
  deployment?: string | null;
  /** Tags (checked, core/tags.ts), written in the same statement when the instance is created. */
  tags?: Record<string, string> | null;
  /**
   * Created already leased to `workerId` (token 1, expiring in `leaseSeconds`), as a step hands its lease
   * to its follow-up: the start hands the first step a lease instead of that step taking one.
   */
  lease?: { workerId: string; leaseSeconds: number } | null;
}

export interface ListInstancesQuery extends InstanceFilter {
  status?: InstanceStatus | InstanceStatus[];
  /** 1..1000, default 50. */
  limit?: number;
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor?: string | null;
}

export interface InstancePage {
  /** Newest first (started_at DESC, instance_id DESC). */
  instances: InstanceRecord[];
  nextCursor: string | null;
}

/** Workflow definitions and instances: create, read, list, and end from outside a step (a cancel, a deadline). */
export interface InstancesArea {
  upsertWorkflowDefinition(workflowName: string, sourceHash: string, sourceCode: string): Promise<void>;
  /** Insert; when the id exists, return the existing row with created=false. */
  createInstance(input: NewInstance): Promise<{ created: boolean; instance: InstanceRecord }>;
  getInstance(instanceId: string): Promise<InstanceRecord | null>;
  /** The traceparent recorded when the instance was started (null: none, or no such instance). */
  getTraceContext(instanceId: string): Promise<string | null>;
  listInstances(query: ListInstancesQuery): Promise<InstancePage>;
  /**
   * Status-guarded (running / waiting_*): in one statement, bump the token (an
   * in-flight step's conclusion commits nothing), release the lock, clear
   * timers and waits, and set `compensating` when compensations exist, else
   * `cancelled`. Null when the instance does not exist; `{ ok:false }` with the
   * status when it is not cancellable.
   */
  cancelInstance(instanceId: string, cancelledBy: string): Promise<{ ok: boolean; status: InstanceStatus; previousStatus: InstanceStatus } | null>;
  /**
   * `cancelInstance`, or a deadline's failure (`timeout`: only once
   * `deadline_at` passed by the database's clock; ends `failed` with
   * `errorData`, or `compensating`).
   */
  endInstance(instanceId: string, end: InstanceEnd): Promise<{ ok: boolean; status: InstanceStatus; previousStatus: InstanceStatus } | null>;
}

/** The WHERE conditions of a list query's filters (not its status, cursor or limit). */
export function instanceFilter(query: InstanceFilter): SQL[] {
  const where: SQL[] = [];
  if (query.workflowName !== undefined) where.push(sql`workflow_name = ${query.workflowName}`);
  if (query.startedAfter) where.push(sql`started_at > ${tsParam(query.startedAfter)}`);
  if (query.startedBefore) where.push(sql`started_at < ${tsParam(query.startedBefore)}`);
  // strpos, not LIKE: the search text is matched literally (no wildcards to escape).
  if (query.deployment !== undefined) where.push(sql`deployment = ${query.deployment}::text`);
  if (query.search) where.push(sql`(strpos(instance_id, ${query.search}::text) > 0 OR strpos(input_data, ${query.search}::text) > 0)`);
  // One index probe per tag (idx_instance_tags_key_value); every one must match.
  for (const [key, value] of query.tags ?? []) {
    where.push(sql`EXISTS (SELECT 1 FROM workflow_instance_tags tg WHERE tg.instance_id = workflow_instances.instance_id AND tg.key = ${key}::text AND tg.value = ${value}::text)`);
  }
  return where;
}

const CANCELLABLE = sql.raw(CANCELLABLE_STATUSES.map((s) => `'${s}'`).join(", "));

export function instancesArea(ex: Executor): InstancesArea {
  const area: InstancesArea = {
    async upsertWorkflowDefinition(workflowName, sourceHash, sourceCode) {
      await ex
        .insert(workflowDefinitions)
        .values({ workflowName, sourceHash, sourceCode })
        .onConflictDoNothing({ target: [workflowDefinitions.workflowName, workflowDefinitions.sourceHash] });
    },

    async createInstance(input) {
      const rows = await queryRows<Row>(
        ex,
        sql`
        WITH ins AS (
          INSERT INTO workflow_instances (instance_id, workflow_name, source_hash, owner_service, input_data, lock_timeout_seconds, trace_context,
                                          parent_instance_id, parent_activity_id, detached, deadline_at, concurrency_key, status,
                                          rate_key, admitted_at, singleton_key, debounce_key, not_before,
                                          origin_instance_id, origin_kind, origin_activity_id, priority, deployment,
                                          locked_by, locked_at, lock_expires_at, lock_token)
          VALUES (${input.instanceId}, ${input.workflowName}, ${input.sourceHash}, ${input.ownerService}, ${input.inputData},
                  ${input.lockTimeoutSeconds ?? null}::int, ${input.traceContext ?? null},
                  ${input.parentInstanceId ?? null}::text, ${input.parentActivityId ?? null}::text, ${input.detached ?? false}::boolean,
                  ${input.timeoutSeconds != null ? dbNowPlus(input.timeoutSeconds) : sql`NULL::timestamptz`},
                  ${input.concurrencyKey ?? null}::text, ${input.status ?? "running"}::text,
                  ${input.rateKey ?? null}::text, ${input.rateKey && input.status !== "queued" ? DB_NOW : sql`NULL::timestamptz`},
                  ${input.singletonKey ?? null}::text, ${input.debounceKey ?? null}::text,
                  ${input.notBeforeSeconds != null ? dbNowPlus(input.notBeforeSeconds) : sql`NULL::timestamptz`},
                  ${input.origin?.instanceId ?? null}::text, ${input.origin?.kind ?? null}::text, ${input.origin?.activityId ?? null}::text,
                  ${input.priority ?? 0}::int, ${input.deployment ?? null}::text,
                  ${input.lease?.workerId ?? null}::text, ${input.lease ? DB_NOW : sql`NULL::timestamptz`},
                  ${input.lease ? dbNowPlus(input.lease.leaseSeconds) : sql`NULL::timestamptz`}, ${input.lease ? 1 : 0}::bigint)
          ON CONFLICT (instance_id) DO NOTHING
          RETURNING ${INSTANCE_COLUMNS}
        )${
          input.tags && Object.keys(input.tags).length
            ? sql`, tg AS (INSERT INTO workflow_instance_tags (instance_id, key, value) SELECT ins.instance_id, t.key, t.value FROM ins, json_each_text(${JSON.stringify(input.tags)}::json) t)`
            : sql``
        }
        SELECT ${INSTANCE_COLUMNS}, true AS created FROM ins
        UNION ALL
        SELECT ${INSTANCE_COLUMNS}, false AS created FROM workflow_instances
        WHERE instance_id = ${input.instanceId} AND NOT EXISTS (SELECT 1 FROM ins)`,
      );
      const row = rows[0];
      if (row) return { created: row.created === true, instance: toInstance(row) };
      // A concurrent insert committed after this statement's snapshot: read it now.
      const existing = await area.getInstance(input.instanceId);
      if (!existing) throw new Error(`createInstance(${input.instanceId}): neither inserted nor found`);
      return { created: false, instance: existing };
    },

    async getTraceContext(instanceId) {
      const [row] = await queryRows<{ trace_context: string | null }>(ex, sql`SELECT trace_context FROM workflow_instances WHERE instance_id = ${instanceId}`);
      return row?.trace_context ?? null;
    },

    async getInstance(instanceId) {
      const [row] = await queryRows<Row>(ex, sql`SELECT ${INSTANCE_COLUMNS} FROM workflow_instances WHERE instance_id = ${instanceId}`);
      return row ? toInstance(row) : null;
    },

    async listInstances(query) {
      const limit = Math.min(1000, Math.max(1, Math.trunc(query.limit ?? 50)));
      const where: SQL[] = [];
      if (query.status !== undefined) {
        const statuses = Array.isArray(query.status) ? query.status : [query.status];
        if (statuses.length === 0) return { instances: [], nextCursor: null };
        where.push(sql`status IN (${sql.join(statuses.map((s) => sql`${s}`), sql`, `)})`);
      }
      where.push(...instanceFilter(query));
      const { rows, nextCursor } = await newestFirstPage(ex, {
        select: sql`${INSTANCE_COLUMNS} FROM workflow_instances`,
        where,
        time: "started_at",
        id: "instance_id",
        cursor: query.cursor,
        limit,
        what: "instance list",
      });
      return { instances: rows.map(toInstance), nextCursor };
    },

    /**
     * One statement. The UPDATE is guarded by the status (no read-then-write
     * race); bumping the token fences off a step that is in flight. An instance
     * with compensations goes to `compensating` (its subscriptions stay until the
     * compensations conclude it, only the wait is cleared); otherwise it ends at
     * once (`cancelled`, or `failed` for a deadline, which must have passed by the
     * database's clock) and leaves its subscriptions and groups here.
     */
    async cancelInstance(instanceId, cancelledBy) {
      return area.endInstance(instanceId, { kind: "cancel", cancelledBy });
    },

    async endInstance(instanceId, end) {
      const detail =
        end.kind === "cancel"
          ? sql`cancel_data = json_build_object('cancelled_by', ${end.cancelledBy}::text,
                                                'cancelled_at', ${isoUtc(DB_NOW)},
                                                'previous_status', w.status)::text`
          : sql`error_data = ${end.errorData}::text`;
      const finalStatus = end.kind === "cancel" ? sql`'cancelled'` : sql`'failed'`;
      const guard = end.kind === "timeout" ? sql`AND w.deadline_at <= ${DB_NOW}` : sql``;
      // A step may be in flight (the lock is held): its activity may still be doing what a compensation
      // undoes, and it may have registered compensations this statement cannot see yet (registerCompensations
      // runs before its activities, but it may commit after this statement's snapshot). So the instance goes
      // `compensating` and the lock stays held, in the end's name (LOCK_HELD_BY_END, token + 1: the step's
      // renewal fails, its ctx.signal aborts, its conclusion commits nothing) until the step gives it back
      // (releaseFencedOut) or the lock expires. The compensation step then reads what is registered, and ends
      // the instance at once when nothing is. An expired lock is taken by the dispatch after the commit.
      const held = sql`w.locked_by IS NOT NULL`;
      const rows = await queryRows<{ current: string; new_status: string | null; previous: string | null }>(
        ex,
        sql`
        WITH cur AS (
          -- An instance already compensating in a cancellable status (a compensation's retry backoff) reports
          -- \`compensating\`: like one that shows it, it cannot be cancelled again.
          SELECT CASE WHEN w.status IN (${CANCELLABLE}) AND NOT ${inBody("w")} THEN 'compensating' ELSE w.status END AS status
          FROM workflow_instances w WHERE w.instance_id = ${instanceId}
        ), upd AS (
          UPDATE workflow_instances w SET
            status = CASE WHEN ${held} OR EXISTS (SELECT 1 FROM workflow_compensations c WHERE c.instance_id = w.instance_id)
                          THEN 'compensating' ELSE ${finalStatus} END,
            ${detail},
            lock_token = w.lock_token + 1,
            locked_by = CASE WHEN ${held} THEN ${sql.raw(`'${LOCK_HELD_BY_END}'`)} || w.locked_by END,
            locked_at = CASE WHEN ${held} THEN w.locked_at END,
            lock_expires_at = CASE WHEN ${held} THEN w.lock_expires_at END,
            updated_at = ${DB_NOW}
          WHERE w.instance_id = ${instanceId} AND w.status IN (${CANCELLABLE}) AND ${inBody("w")} ${guard}
          RETURNING w.instance_id, w.status, ${end.kind === "cancel" ? sql`(w.cancel_data::json ->> 'previous_status')` : sql`NULL::text`} AS previous
        ), ${withdrawWaits(sql`SELECT instance_id FROM upd`, sql`SELECT instance_id FROM upd WHERE status = 'compensating'`)}, subs AS (
          DELETE FROM channel_subscriptions WHERE instance_id IN (SELECT instance_id FROM upd WHERE status <> 'compensating')
        ), cursors AS (
          DELETE FROM channel_delivery_cursors WHERE instance_id IN (SELECT instance_id FROM upd WHERE status <> 'compensating')
        ), groups AS (
          DELETE FROM workflow_group_memberships WHERE instance_id IN (SELECT instance_id FROM upd WHERE status <> 'compensating')
        ), hooks AS (
          UPDATE workflow_webhooks SET status = 'cancelled' WHERE instance_id IN (SELECT instance_id FROM upd) AND status = 'open'
        )
        SELECT cur.status AS current, upd.status AS new_status, upd.previous FROM cur LEFT JOIN upd ON true`,
      );
      const row = rows[0];
      if (!row) return null;
      const current = row.current as InstanceStatus;
      // The status the UPDATE saw (it may have waited for the row's lock), else the snapshot's.
      if (row.new_status !== null) return { ok: true, status: row.new_status as InstanceStatus, previousStatus: (row.previous ?? current) as InstanceStatus };
      let status = current;
      if (CANCELLABLE_STATUSES.includes(status)) {
        // The statement's snapshot saw a cancellable status, but the row changed while the UPDATE waited
        // for its lock (a step completed it): report what it is now, not what the snapshot said.
        const [now] = await queryRows<{ status: string }>(
          ex,
          sql`SELECT CASE WHEN w.status IN (${CANCELLABLE}) AND NOT ${inBody("w")} THEN 'compensating' ELSE w.status END AS status
              FROM workflow_instances w WHERE w.instance_id = ${instanceId}`,
        );
        status = (now?.status ?? status) as InstanceStatus;
      }
      return { ok: false, status, previousStatus: status };
    },
  };
  return area;
}
