/**
 * Concurrency keys (`concurrency: { key, limit }`). A slot is not a counter
 * but a fact about instance rows: an instance holds its key's slot while it
 * is unfinished and not `queued`. So no slot can leak — a worker that dies
 * leaves its instance running with an expired lease, the sweeper resumes it,
 * and its end frees the slot like any other end.
 *
 * Admission and promotion run under a per-key transaction-scoped advisory
 * lock, so racing starts (any number of engines) and promotions count the
 * same rows one at a time: never more than `limit` holders, and queued
 * instances start oldest first (started_at, instance_id).
 */
import { sql } from "drizzle-orm";
import { makeRunnable } from "./transitions.ts";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW } from "./rows.ts";
import type { InstanceStatus } from "../core/model.ts";

/** Flow control (concurrency slots, rate windows, singletons, debounce), each under its key's lock. */
export interface FlowControlArea {
  /**
   * In a transaction, under the key's lock (held to its end): whether an
   * instance created now may run (`running`: fewer than `limit` unfinished,
   * unqueued instances hold the key and none is queued before it) or must
   * wait (`queued`).
   */
  admitConcurrency(key: string, limit: number): Promise<"running" | "queued">;
  /** Under the key's lock: promote the oldest queued instances into the free slots; returns their ids. */
  promoteQueued(key: string, limit: number): Promise<string[]>;
  /** Concurrency keys of these workflows that have queued instances (bounded). */
  queuedConcurrencyKeys(workflowNames: string[], limit: number): Promise<string[]>;
  concurrencyKeyOf(instanceId: string): Promise<string | null>;
  /**
   * In a transaction, under the rate key's lock: `running` when fewer than
   * `limit` instances of the key were admitted in the last `periodSeconds`
   * and none is queued, else `queued`; `nextInSeconds`: when the window has
   * room again (0: now).
   */
  admitRate(key: string, limit: number, periodSeconds: number): Promise<{ status: "running" | "queued"; nextInSeconds: number }>;
  /** Under the rate key's lock: admit the oldest queued instances the window has room for; `nextInSeconds` is null once the queue is empty. */
  promoteRateQueued(key: string, limit: number, periodSeconds: number): Promise<{ ids: string[]; nextInSeconds: number | null }>;
  /** Rate keys of these workflows that have queued instances (bounded). */
  queuedRateKeys(workflowNames: string[], limit: number): Promise<string[]>;
  /** In a transaction, under the singleton key's lock (held to its end): the key's unfinished instance, if any. */
  singletonHolder(key: string): Promise<{ instanceId: string; status: InstanceStatus } | null>;
  /**
   * In a transaction, under the debounce key's lock: collapse a start into
   * the key's pending (`queued`) instance — its input becomes `inputData`,
   * its start moves to `periodSeconds` from now (at most `maxWaitSeconds`
   * after its creation). Null when the key has no pending instance.
   */
  debounceInto(key: string, inputData: string, periodSeconds: number, maxWaitSeconds: number | null): Promise<{ instanceId: string; dueInSeconds: number } | null>;
  /** Start the debounced instances of these workflows whose time came (bounded); returns their ids. */
  startDueDebounced(workflowNames: string[], limit: number): Promise<string[]>;
}

const lockKey = (key: string) => sql`SELECT pg_advisory_xact_lock(hashtextextended(${`edda:concurrency:${key}`}::text, 0))`;
const HOLDING = sql`status NOT IN ('completed', 'failed', 'cancelled', 'queued')`;

/*
 * Rate limits (`rateLimit: { key, limit, periodSeconds }`): an admission is
 * the instant an instance of the key leaves the queue (`admitted_at`, the
 * database clock taken after the key's lock, so admissions of one key are
 * ordered). At most `limit` admissions fall in any `periodSeconds` window;
 * the key's queue is its rows still `queued` with no admission, highest
 * priority first, then oldest.
 */
const rateLock = (key: string) => sql`SELECT pg_advisory_xact_lock(hashtextextended(${`edda:rate:${key}`}::text, 0))`;
const windowOf = (periodSeconds: number) => sql`(${DB_NOW} - make_interval(secs => ${periodSeconds}::float8))`;
const RATE_QUEUED = sql`status = 'queued' AND admitted_at IS NULL`;

/** Seconds until the window of `key` has room again: 0 with fewer than `limit` admissions in it. */
function nextRoom(key: string, limit: number, periodSeconds: number) {
  return sql`(SELECT greatest(0, extract(epoch FROM (admitted_at + make_interval(secs => ${periodSeconds}::float8) - ${DB_NOW})))::float8
              FROM workflow_instances WHERE rate_key = ${key} AND admitted_at > ${windowOf(periodSeconds)}
              ORDER BY admitted_at DESC OFFSET ${limit - 1}::int LIMIT 1)`;
}


export function flowControlArea(ex: Executor): FlowControlArea {
  return {
    async admitConcurrency(key, limit) {
      await ex.execute(lockKey(key));
      const [row] = await queryRows<{ holders: number; queued: number }>(
        ex,
        sql`SELECT (SELECT count(*)::int FROM workflow_instances WHERE concurrency_key = ${key} AND ${HOLDING}) AS holders,
                   (SELECT count(*)::int FROM workflow_instances WHERE concurrency_key = ${key} AND status = 'queued') AS queued`,
      );
      return row && row.holders < limit && row.queued === 0 ? "running" : "queued";
    },

    async promoteQueued(key, limit) {
      await ex.execute(lockKey(key));
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`WITH free AS (
              SELECT greatest(${limit}::int - (SELECT count(*)::int FROM workflow_instances WHERE concurrency_key = ${key} AND ${HOLDING}), 0) AS n
            ), next AS (
              SELECT instance_id FROM workflow_instances WHERE concurrency_key = ${key} AND status = 'queued'
              ORDER BY priority DESC, started_at, instance_id LIMIT (SELECT n FROM free)
              FOR UPDATE
            )
            ${makeRunnable({ where: sql`instance_id IN (SELECT instance_id FROM next) AND status = 'queued'`, returning: sql`instance_id` })}`,
      );
      return rows.map((r) => r.instance_id);
    },

    async queuedConcurrencyKeys(workflowNames, limit) {
      if (workflowNames.length === 0) return [];
      const rows = await queryRows<{ concurrency_key: string }>(
        ex,
        sql`SELECT DISTINCT concurrency_key FROM workflow_instances
            WHERE status = 'queued' AND concurrency_key IS NOT NULL
              AND workflow_name IN (${sql.join(workflowNames.map((n) => sql`${n}`), sql`, `)})
            LIMIT ${limit}::int`,
      );
      return rows.map((r) => r.concurrency_key);
    },

    async concurrencyKeyOf(instanceId) {
      const [row] = await queryRows<{ concurrency_key: string | null }>(ex, sql`SELECT concurrency_key FROM workflow_instances WHERE instance_id = ${instanceId}`);
      return row?.concurrency_key ?? null;
    },

    async admitRate(key, limit, periodSeconds) {
      await ex.execute(rateLock(key));
      const [row] = await queryRows<{ next: number | null; queued: boolean }>(
        ex,
        sql`SELECT ${nextRoom(key, limit, periodSeconds)} AS next,
                   EXISTS (SELECT 1 FROM workflow_instances WHERE rate_key = ${key} AND ${RATE_QUEUED}) AS queued`,
      );
      const next = row?.next ?? 0;
      return { status: next === 0 && !row?.queued ? "running" : "queued", nextInSeconds: next };
    },

    async promoteRateQueued(key, limit, periodSeconds) {
      await ex.execute(rateLock(key));
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`WITH free AS (
              SELECT greatest(${limit}::int - (SELECT count(*)::int FROM workflow_instances WHERE rate_key = ${key} AND admitted_at > ${windowOf(periodSeconds)}), 0) AS n
            ), next AS (
              SELECT instance_id FROM workflow_instances WHERE rate_key = ${key} AND ${RATE_QUEUED}
              ORDER BY priority DESC, started_at, instance_id LIMIT (SELECT n FROM free)
              FOR UPDATE
            )
            ${makeRunnable({ set: sql`admitted_at = ${DB_NOW}`, where: sql`instance_id IN (SELECT instance_id FROM next) AND status = 'queued'`, returning: sql`instance_id` })}`,
      );
      const [rest] = await queryRows<{ next: number | null; queued: boolean }>(
        ex,
        sql`SELECT ${nextRoom(key, limit, periodSeconds)} AS next,
                   EXISTS (SELECT 1 FROM workflow_instances WHERE rate_key = ${key} AND ${RATE_QUEUED}) AS queued`,
      );
      return { ids: rows.map((r) => r.instance_id), nextInSeconds: rest?.queued ? (rest.next ?? 0) : null };
    },

    async queuedRateKeys(workflowNames, limit) {
      if (workflowNames.length === 0) return [];
      const rows = await queryRows<{ rate_key: string }>(
        ex,
        sql`SELECT DISTINCT rate_key FROM workflow_instances
            WHERE ${RATE_QUEUED} AND rate_key IS NOT NULL
              AND workflow_name IN (${sql.join(workflowNames.map((n) => sql`${n}`), sql`, `)})
            LIMIT ${limit}::int`,
      );
      return rows.map((r) => r.rate_key);
    },

    /* Singletons: the key's lock serializes starts; the holder is any unfinished instance of the key. */
    async singletonHolder(key) {
      await ex.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${`edda:singleton:${key}`}::text, 0))`);
      const [row] = await queryRows<{ instance_id: string; status: InstanceStatus }>(
        ex,
        sql`SELECT instance_id, status FROM workflow_instances
            WHERE singleton_key = ${key} AND status NOT IN ('completed', 'failed', 'cancelled')
            ORDER BY started_at, instance_id LIMIT 1`,
      );
      return row ? { instanceId: row.instance_id, status: row.status } : null;
    },

    /*
     * Debounce: a key's pending instance is its row still `queued`. A start
     * collapses into it (row lock) or, under the key's lock, creates it; the
     * start of a due one skips rows a collapse holds (SKIP LOCKED) and re-checks
     * `queued`, so a start either lands in the instance before it runs or makes
     * the next one — never both, never neither.
     */
    async debounceInto(key, inputData, periodSeconds, maxWaitSeconds) {
      await ex.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${`edda:debounce:${key}`}::text, 0))`);
      const due = sql`(${DB_NOW} + make_interval(secs => ${periodSeconds}::float8))`;
      const capped = maxWaitSeconds === null ? due : sql`least(${due}, started_at + make_interval(secs => ${maxWaitSeconds}::float8))`;
      const [row] = await queryRows<{ instance_id: string; due_in: number }>(
        ex,
        sql`UPDATE workflow_instances SET input_data = ${inputData}, not_before = ${capped}, updated_at = ${DB_NOW}
            WHERE instance_id = (SELECT instance_id FROM workflow_instances WHERE debounce_key = ${key} AND status = 'queued' ORDER BY started_at LIMIT 1)
              AND status = 'queued'
            RETURNING instance_id, greatest(0, extract(epoch FROM (not_before - ${DB_NOW})))::float8 AS due_in`,
      );
      return row ? { instanceId: row.instance_id, dueInSeconds: row.due_in } : null;
    },

    async startDueDebounced(workflowNames, limit) {
      if (workflowNames.length === 0) return [];
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        makeRunnable({
          where: sql`instance_id IN (
              SELECT instance_id FROM workflow_instances
              WHERE debounce_key IS NOT NULL AND status = 'queued' AND not_before <= ${DB_NOW}
                AND workflow_name IN (${sql.join(workflowNames.map((n) => sql`${n}`), sql`, `)})
              ORDER BY not_before LIMIT ${limit}::int
              FOR UPDATE SKIP LOCKED
            ) AND status = 'queued'`,
          returning: sql`instance_id`,
        }),
      );
      return rows.map((r) => r.instance_id);
    },
  };
}
