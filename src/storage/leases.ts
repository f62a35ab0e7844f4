/**
 * Leases and the fenced writes of a step.
 *
 * A lease is (locked_by, lock_token, lock_expires_at) on the instance row. The
 * token changes on every acquisition, hand-off, release and cancellation, so a
 * write guarded by `locked_by = worker AND lock_token = token` commits only
 * for the holder of that very acquisition: a zombie whose lease expired and
 * was taken over (or released by the sweeper, or cancelled) writes nothing.
 * An expired lease nobody has taken yet still fences correctly (nobody else
 * ran a step in between), so expiry alone does not void a conclusion.
 */
import { sql, type Placeholder, type SQL } from "drizzle-orm";
import { groupedConclusion, handsOff, singleConclusion, type ConcludeOptions, type ConcludeResult, type FencedConclusion, type StepConclusion } from "./conclusion.ts";
import { makeRunnable, withdrawWaits } from "./transitions.ts";
import { queryRows, queryText, type Executor } from "./database.ts";
import { shaped } from "./shaped.ts";
import { mayRun } from "./versioning.ts";
import { DB_NOW, historyJson, INSTANCE_COLUMNS, toHistoryList, toInstance, toNumber, type Row } from "./rows.ts";
import { LOCK_HELD_BY_END, RUNNABLE_STATUSES, type Fence, type HistoryEvent, type InstanceRecord, type NewCompensation, type RunsFor } from "./records.ts";

export interface LeasedInstance {
  instance: InstanceRecord;
  fence: Fence;
  /** The current run's history in order (only when requested / always for loadLeased). */
  history: HistoryEvent[];
}

export type { ConcludeOptions, ConcludeResult, FencedConclusion, StepConclusion } from "./conclusion.ts";

/** `loadLeasedMany`'s answer for one fence: the leased instance (null: the fence no longer holds), or why it could not be opened. */
export type LeasedLoad = { ok: true; leased: LeasedInstance | null } | { ok: false; error: unknown };

/** Leases (fenced by their token) and the writes that conclude a step under one. */
export interface LeasesArea {
  /**
   * One statement: take the lease if the instance is runnable and the lock is
   * free or expired; the token is incremented. With `withHistory`, the history
   * is loaded in the same statement; with `handedOff`, only while that hand-off
   * (holder and token) is still the lock, expired untouched; with `runs`, only an
   * instance that deployment may run (versioning.ts `mayRun`).
   */
  acquireLease(instanceId: string, workerId: string, leaseSeconds: number, opts?: { withHistory?: boolean; handedOff?: { workerId: string; token: number }; runs?: RunsFor }): Promise<LeasedInstance | null>;
  /** Load instance + history when `fence` still holds the lease (handed-off lease). One statement. */
  loadLeased(fence: Fence): Promise<LeasedInstance | null>;
  /**
   * `loadLeased` for several fences in one statement (the steps of a queue batch, of a batched follow-up
   * request: engine/group-load.ts). The answer at index i is fence i's; the instances must be distinct.
   */
  loadLeasedMany(fences: readonly Fence[]): Promise<LeasedLoad[]>;
  renewLease(fence: Fence, leaseSeconds: number): Promise<boolean>;
  releaseLease(fence: Fence): Promise<boolean>;
  /**
   * Give back the lock a cancel or a deadline kept for `fence`'s holder (`endInstance`: the lock is held
   * in the end's name, `LOCK_HELD_BY_END` + worker, token + 1, until the fenced-out step is over). True when
   * it was held so: the instance is free for its compensations now.
   */
  releaseFencedOut(fence: Fence): Promise<boolean>;
  /**
   * Fenced: store compensations a step registered before its activities run, so an end that lands during
   * them sees them (the step's conclusion writes them again, ON CONFLICT DO NOTHING). False when the fence
   * no longer holds (nothing written).
   */
  registerCompensations(fence: Fence, compensations: readonly NewCompensation[]): Promise<boolean>;
  /** Clear expired leases (bounded, SKIP LOCKED); returns the ids now runnable. */
  releaseStaleLeases(limit: number): Promise<string[]>;
  /**
   * Runnable, unlocked instances, oldest update first; with `minIdleSeconds`,
   * only those untouched that long (a fresh one's first dispatch is likely
   * still in flight). With `runs`, only those that deployment may run (versioning.ts `mayRun`).
   */
  findResumableInstances(limit: number, minIdleSeconds?: number, runs?: RunsFor): Promise<string[]>;
  /**
   * The fenced conclusion of a step (see StepConclusion). On a terminal status
   * the instance also leaves its channel subscriptions, groups and timers.
   */
  concludeStep(fence: Fence, conclusion: StepConclusion, opts?: ConcludeOptions): Promise<ConcludeResult>;
  /**
   * Several steps' conclusions in one statement (group commit), each under its own fence: the result at
   * index i is item i's, `{ ok: false }` where its fence did not hold (that row wrote nothing; the others
   * are written all the same). The instances must be distinct. Throws when the statement fails (then
   * nothing was written, unless the connection was lost before the reply).
   */
  concludeSteps(items: readonly FencedConclusion[]): Promise<ConcludeResult[]>;
  /** Fenced: archive the current history under the current run, clear it, start run+1 with new input. */
  recurInstance(fence: Fence, newInputData: string): Promise<boolean>;
}

const DIVISION_BY_ZERO = "22012";

/** The SQLSTATE of a database error, through the wrappers drivers and drizzle put around it. */
function sqlState(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

const RUNNABLE = sql.raw(RUNNABLE_STATUSES.map((s) => `'${s}'`).join(", "));

function fenceWhere(f: Fence): SQL {
  return sql`instance_id = ${f.instanceId} AND locked_by = ${f.workerId} AND lock_token = ${f.token}::bigint`;
}

/** The fence's condition in a shaped statement (placeholders `instanceId`, `workerId`, `token`). */
const SHAPED_FENCE = (v: Record<"instanceId" | "workerId" | "token", Placeholder>) =>
  sql`instance_id = ${v.instanceId} AND locked_by = ${v.workerId} AND lock_token = ${v.token}::bigint`;

// The lease statements of every step (shaped.ts: built once, only their values change).
// `expected`: only while the lock is still the hand-off a follow-up names, holder and token (one whose lease ran out before
// it arrived takes it over; one arriving after any other acquisition or release finds it moved and takes nothing).
const acquireShape = (withHistory: boolean, expected: boolean) =>
  shaped<"instanceId" | "workerId" | "leaseSeconds" | "token" | "holder" | "deployment" | "auto">(
    (v) => sql`
        WITH upd AS (
          UPDATE workflow_instances w SET
            locked_by = ${v.workerId}, locked_at = ${DB_NOW}, lock_token = lock_token + 1,
            lock_expires_at = (statement_timestamp() + make_interval(secs => ${v.leaseSeconds}::float8))
          WHERE instance_id = ${v.instanceId} AND status IN (${RUNNABLE})
            AND (locked_by IS NULL OR lock_expires_at IS NULL OR lock_expires_at < ${DB_NOW})${expected ? sql` AND lock_token = ${v.token}::bigint AND locked_by = ${v.holder}` : sql``}
            AND ${mayRun(sql`w`, v.deployment, v.auto)}
          RETURNING ${INSTANCE_COLUMNS}
        )
        SELECT upd.*${withHistory ? sql`, ${historyJson(sql`upd.instance_id`)} AS history` : sql``} FROM upd`,
  );
const ACQUIRE = acquireShape(false, false);
const ACQUIRE_WITH_HISTORY = acquireShape(true, false);
const ACQUIRE_EXPECTED = acquireShape(false, true);
const ACQUIRE_EXPECTED_WITH_HISTORY = acquireShape(true, true);
const LOAD_LEASED = shaped<"instanceId" | "workerId" | "token">(
  (v) => sql`SELECT ${INSTANCE_COLUMNS}, ${historyJson(sql`w.instance_id`)} AS history
            FROM workflow_instances w
            WHERE ${SHAPED_FENCE(v)} AND lock_expires_at > ${DB_NOW}`,
);
const RENEW = shaped<"instanceId" | "workerId" | "token" | "leaseSeconds">(
  (v) => sql`UPDATE workflow_instances SET lock_expires_at = (statement_timestamp() + make_interval(secs => ${v.leaseSeconds}::float8))
            WHERE ${SHAPED_FENCE(v)} RETURNING 1 AS ok`,
);
const RELEASE = shaped<"instanceId" | "workerId" | "token">(
  (v) => sql`UPDATE workflow_instances SET locked_by = NULL, locked_at = NULL, lock_expires_at = NULL,
                   lock_token = lock_token + 1, updated_at = ${DB_NOW}
            WHERE ${SHAPED_FENCE(v)} RETURNING 1 AS ok`,
);

const RELEASE_FENCED_OUT = shaped<"instanceId" | "workerId" | "token">(
  (v) => sql`UPDATE workflow_instances SET locked_by = NULL, locked_at = NULL, lock_expires_at = NULL,
                   lock_token = lock_token + 1, updated_at = ${DB_NOW}
            WHERE instance_id = ${v.instanceId} AND locked_by = ${sql.raw(`'${LOCK_HELD_BY_END}'`)} || ${v.workerId}::text
              AND lock_token = ${v.token}::bigint + 1
            RETURNING 1 AS ok`,
);
const REGISTER_COMPENSATIONS = shaped<"instanceId" | "workerId" | "token" | "rows">(
  (v) => sql`WITH f AS (SELECT instance_id FROM workflow_instances WHERE ${SHAPED_FENCE(v)}),
            ins AS (
              INSERT INTO workflow_compensations (instance_id, activity_id, activity_name, args)
              SELECT f.instance_id, c.activity_id, c.activity_name, c.args
              FROM f, json_to_recordset(${v.rows}::json) AS c(k int, activity_id text, activity_name text, args text) ORDER BY c.k
              ON CONFLICT (instance_id, activity_id) DO NOTHING
            )
            SELECT instance_id FROM f`,
);

function toLeased(row: Row, withHistory: boolean): LeasedInstance {
  const instance = toInstance(row);
  return {
    instance,
    fence: { instanceId: instance.instanceId, workerId: instance.lockedBy ?? "", token: instance.lockToken },
    history: withHistory ? toHistoryList(row.history) : [],
  };
}

export function leasesArea(ex: Executor): LeasesArea {
  /**
   * The whole conclusion of a step as ONE statement of data-modifying CTEs, all hanging off the fenced
   * UPDATE: when the fence fails, `upd` is empty and every other CTE inserts/deletes nothing. The text is
   * built once per shape (conclusion.ts); this call only fills its parameters.
   */
  const concludeStep: LeasesArea["concludeStep"] = async (fence, c, opts) => {
    const last = opts?.last ?? false;
    const { text, params } = singleConclusion(fence, c, last);
    let row: { lock_token: unknown } | undefined;
    try {
      [row] = await queryText<{ lock_token: unknown }>(ex, text, params);
    } catch (err) {
      // `last`: the fence failed as a division by zero, so that a COMMIT pipelined behind it rolls back.
      if (last && sqlState(err) === DIVISION_BY_ZERO) return { ok: false };
      throw err;
    }
    if (row?.lock_token === null || row?.lock_token === undefined) return { ok: false };
    return handsOff(c) ? { ok: true, token: toNumber(row.lock_token) } : { ok: true };
  };

  return {
    /** One statement; with `withHistory` the history comes back in the same round-trip. */
    async acquireLease(instanceId, workerId, leaseSeconds, opts) {
      const withHistory = opts?.withHistory ?? false;
      const expected = opts?.handedOff;
      const shape = expected === undefined ? (withHistory ? ACQUIRE_WITH_HISTORY : ACQUIRE) : withHistory ? ACQUIRE_EXPECTED_WITH_HISTORY : ACQUIRE_EXPECTED;
      const runs = opts?.runs;
      const { text, params } = shape({ instanceId, workerId, leaseSeconds, token: expected?.token ?? 0, holder: expected?.workerId ?? "", deployment: runs?.deployment ?? null, auto: JSON.stringify(runs?.autoWorkflows ?? []) });
      const [row] = await queryText<Row>(ex, text, params);
      return row ? toLeased(row, withHistory) : null;
    },

    /** The instance and its history, when `fence` still holds an unexpired lease. One statement. */
    async loadLeased(fence) {
      const { text, params } = LOAD_LEASED(fence);
      const [row] = await queryText<Row>(ex, text, params);
      return row ? toLeased(row, true) : null;
    },

    async loadLeasedMany(fences) {
      if (fences.length === 0) return [];
      const wanted = JSON.stringify(fences.map((f, i) => ({ ord: i, iid: f.instanceId, worker: f.workerId, token: f.token })));
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT f.ord AS load_ord, ${INSTANCE_COLUMNS}, ${historyJson(sql`w.instance_id`)} AS history
            FROM json_to_recordset(${wanted}::json) AS f(ord int, iid text, worker text, token bigint)
            JOIN workflow_instances w ON w.instance_id = f.iid AND w.locked_by = f.worker AND w.lock_token = f.token
            WHERE w.lock_expires_at > ${DB_NOW}`,
      );
      const out: LeasedLoad[] = fences.map(() => ({ ok: true, leased: null }));
      for (const row of rows) out[Number(row.load_ord)] = { ok: true, leased: toLeased(row, true) };
      return out;
    },

    async renewLease(fence, leaseSeconds) {
      const { text, params } = RENEW({ ...fence, leaseSeconds });
      const rows = await queryText(ex, text, params);
      return rows.length > 0;
    },

    async releaseLease(fence) {
      const { text, params } = RELEASE(fence);
      const rows = await queryText(ex, text, params);
      return rows.length > 0;
    },

    async releaseFencedOut(fence) {
      const { text, params } = RELEASE_FENCED_OUT(fence);
      const rows = await queryText(ex, text, params);
      return rows.length > 0;
    },

    async registerCompensations(fence, compensations) {
      const rows = JSON.stringify(compensations.map((c, k) => ({ k, activity_id: c.activityId, activity_name: c.activityName, args: c.args })));
      const { text, params } = REGISTER_COMPENSATIONS({ ...fence, rows });
      return (await queryText(ex, text, params)).length > 0;
    },

    /** Bounded, SKIP LOCKED; the token is bumped so the former holder is fenced off for good. */
    async releaseStaleLeases(limit) {
      const rows = await queryRows<{ instance_id: string; status: string }>(
        ex,
        sql`
        WITH stale AS (
          SELECT instance_id FROM workflow_instances
          WHERE locked_by IS NOT NULL AND lock_expires_at < ${DB_NOW}
          ORDER BY lock_expires_at
          LIMIT ${limit}::int
          FOR UPDATE SKIP LOCKED
        )
        UPDATE workflow_instances w SET locked_by = NULL, locked_at = NULL, lock_expires_at = NULL,
               lock_token = w.lock_token + 1, updated_at = ${DB_NOW}
        FROM stale WHERE w.instance_id = stale.instance_id
        RETURNING w.instance_id, w.status`,
      );
      return rows.filter((r) => (RUNNABLE_STATUSES as readonly string[]).includes(r.status)).map((r) => r.instance_id);
    },

    async findResumableInstances(limit, minIdleSeconds = 0, runs) {
      const idle = minIdleSeconds > 0 ? sql`AND updated_at < ${DB_NOW} - make_interval(secs => ${minIdleSeconds}::float8)` : sql``;
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`SELECT instance_id FROM workflow_instances w
            WHERE status IN (${RUNNABLE}) AND locked_by IS NULL ${idle}
              AND ${mayRun(sql`w`, sql`${runs?.deployment ?? null}`, sql`${JSON.stringify(runs?.autoWorkflows ?? [])}`)}
            ORDER BY updated_at, instance_id LIMIT ${limit}::int`,
      );
      return rows.map((r) => r.instance_id);
    },

    concludeStep,

    async concludeSteps(items) {
      if (items.length === 1) return [await concludeStep(items[0]!.fence, items[0]!.conclusion)];
      const { text, params } = groupedConclusion(items);
      const rows = await queryText<{ ord: unknown; lock_token: unknown }>(ex, text, params);
      const results: ConcludeResult[] = items.map(() => ({ ok: false }));
      for (const r of rows) {
        const i = toNumber(r.ord);
        results[i] = handsOff(items[i]!.conclusion) ? { ok: true, token: toNumber(r.lock_token) } : { ok: true };
      }
      return results;
    },

    /**
     * Fenced, one statement: archive the current run's history under its run
     * number, clear it, and start run + 1 with the new input, keeping the lease.
     * Channel subscriptions (with their cursors) and group memberships are kept;
     * what belongs to the finished run goes: its compensations (the run completed,
     * and the next run registers its own at the same activity ids), its pending
     * timers and its wait markers (they would record outcomes into the new run's
     * history under reused activity ids).
     */
    async recurInstance(fence, newInputData) {
      const rows = await queryRows(
        ex,
        sql`
        WITH upd AS (
          ${makeRunnable({
            set: sql`run = run + 1, input_data = ${newInputData}, output_data = NULL, error_data = NULL, current_activity_id = NULL`,
            where: fenceWhere(fence),
            returning: sql`instance_id, run - 1 AS prev_run`,
          })}
        ), arch AS (
          INSERT INTO workflow_history_archive
            (instance_id, run, activity_id, event_type, data_type, event_data, event_data_binary, created_at)
          SELECT h.instance_id, upd.prev_run, h.activity_id, h.event_type, h.data_type, h.event_data, h.event_data_binary, h.created_at
          FROM workflow_history h JOIN upd ON h.instance_id = upd.instance_id ORDER BY h.id
        ), del AS (
          DELETE FROM workflow_history h USING upd WHERE h.instance_id = upd.instance_id
        ), comps AS (
          DELETE FROM workflow_compensations c USING upd WHERE c.instance_id = upd.instance_id
        ), ${withdrawWaits(sql`SELECT instance_id FROM upd`)}
        SELECT instance_id FROM upd`,
      );
      return rows.length > 0;
    },
  };
}
