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
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW } from "./rows.ts";

const lockKey = (key: string) => sql`SELECT pg_advisory_xact_lock(hashtextextended(${`edda:concurrency:${key}`}::text, 0))`;
const HOLDING = sql`status NOT IN ('completed', 'failed', 'cancelled', 'queued')`;

export async function admitConcurrency(tx: Executor, key: string, limit: number): Promise<"running" | "queued"> {
  await tx.execute(lockKey(key));
  const [row] = await queryRows<{ holders: number; queued: number }>(
    tx,
    sql`SELECT (SELECT count(*)::int FROM workflow_instances WHERE concurrency_key = ${key} AND ${HOLDING}) AS holders,
               (SELECT count(*)::int FROM workflow_instances WHERE concurrency_key = ${key} AND status = 'queued') AS queued`,
  );
  return row && row.holders < limit && row.queued === 0 ? "running" : "queued";
}

export async function promoteQueued(tx: Executor, key: string, limit: number): Promise<string[]> {
  await tx.execute(lockKey(key));
  const rows = await queryRows<{ instance_id: string }>(
    tx,
    sql`WITH free AS (
          SELECT greatest(${limit}::int - (SELECT count(*)::int FROM workflow_instances WHERE concurrency_key = ${key} AND ${HOLDING}), 0) AS n
        ), next AS (
          SELECT instance_id FROM workflow_instances WHERE concurrency_key = ${key} AND status = 'queued'
          ORDER BY started_at, instance_id LIMIT (SELECT n FROM free)
          FOR UPDATE
        )
        UPDATE workflow_instances SET status = 'running', updated_at = ${DB_NOW}
        WHERE instance_id IN (SELECT instance_id FROM next) AND status = 'queued'
        RETURNING instance_id`,
  );
  return rows.map((r) => r.instance_id);
}

export async function queuedConcurrencyKeys(ex: Executor, workflowNames: string[], limit: number): Promise<string[]> {
  if (workflowNames.length === 0) return [];
  const rows = await queryRows<{ concurrency_key: string }>(
    ex,
    sql`SELECT DISTINCT concurrency_key FROM workflow_instances
        WHERE status = 'queued' AND concurrency_key IS NOT NULL
          AND workflow_name IN (${sql.join(workflowNames.map((n) => sql`${n}`), sql`, `)})
        LIMIT ${limit}::int`,
  );
  return rows.map((r) => r.concurrency_key);
}

export async function concurrencyKeyOf(ex: Executor, instanceId: string): Promise<string | null> {
  const [row] = await queryRows<{ concurrency_key: string | null }>(ex, sql`SELECT concurrency_key FROM workflow_instances WHERE instance_id = ${instanceId}`);
  return row?.concurrency_key ?? null;
}
