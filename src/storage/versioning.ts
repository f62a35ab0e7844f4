/**
 * Deployments and which instances each may run (engine/versioning.ts has the policy).
 *
 * `mayRun` is the one predicate every claim of a step goes through — the step's lease
 * (leases.ts acquireLease, which the dispatchers' hand-offs use too) and the sweep's resumable
 * scan (findResumableInstances): an engine of deployment D takes an instance when it is D's, when
 * it predates deployments (null), or when its workflow is `auto` here, D has not refused it, and D
 * is newer than the instance's deployment: first seen later — a deployment not seen yet (no sweep of
 * it has run) counts as the newest, so a fresh process takes over at its first step, not its first sweep.
 * Everything else waits for an engine of its own deployment, untouched.
 *
 * The `deployments` table orders deployments (first seen) and tells which are still served
 * (last seen, renewed by each sweep of that deployment).
 */
import { sql, type Placeholder, type SQL } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, toDate } from "./rows.ts";
import { TERMINAL_STATUSES, type Fence } from "./records.ts";

/**
 * The instances (alias `w`) an engine may run: `deployment` null lets every instance through (an engine
 * that does not say which deployment it is, and the storage contract's own callers). `auto`: a JSON
 * array of workflow names.
 */
export function mayRun(w: SQL, deployment: SQL | Placeholder, auto: SQL | Placeholder): SQL {
  return sql`(${deployment}::text IS NULL OR ${w}.deployment IS NULL OR ${w}.deployment = ${deployment}::text
    OR (${w}.workflow_name IN (SELECT jsonb_array_elements_text(${auto}::jsonb))
        AND ${w}.replay_refused_by IS DISTINCT FROM ${deployment}::text
        AND NOT EXISTS (SELECT 1 FROM deployments n JOIN deployments o ON o.deployment = ${w}.deployment
                        WHERE n.deployment = ${deployment}::text AND o.first_seen_at >= n.first_seen_at)))`;
}

/** A deployment as the registry knows it. */
export interface DeploymentSighting {
  deployment: string;
  firstSeenAt: Date;
  lastSeenAt: Date;
}

const TERMINAL = sql.raw(TERMINAL_STATUSES.map((s) => `'${s}'`).join(", "));

export interface VersioningArea {
  /**
   * An engine of `deployment` is alive (each sweep): renew its last sighting; the first one also records
   * when it was first seen — the earlier of now and its oldest stored instance's start, so a deployment
   * whose engines swept first after an upgrade of the database still orders before its successors.
   */
  seeDeployment(deployment: string): Promise<void>;
  getDeployment(deployment: string): Promise<DeploymentSighting | null>;
  /**
   * Fenced: the instance moves to `deployment` (its code replays the history), any refusal cleared. The lease is
   * kept: the step goes on. False when the fence no longer holds.
   */
  adoptInstance(fence: Fence, deployment: string): Promise<boolean>;
  /**
   * Fenced: `deployment`'s code does not replay the instance; record it (with the mismatch) and give the lease
   * back, so an engine of its own deployment takes it — `mayRun` keeps this one from trying again.
   */
  refuseInstance(fence: Fence, deployment: string, error: string): Promise<boolean>;
  /**
   * An operator's upgrade: move an unfinished instance to `deployment` when it is still as checked — on
   * `from`, no step since (its lock token as seen: every lease bumps it), no live lease on it. False when it changed (check again).
   */
  upgradeInstance(instanceId: string, deployment: string, check: { from: string | null; seenToken: number }): Promise<boolean>;
}

export function versioningArea(ex: Executor): VersioningArea {
  return {
    async seeDeployment(deployment) {
      // The oldest-instance read only at the first sighting: later ones are one indexed update.
      const seen = await queryRows(ex, sql`UPDATE deployments SET last_seen_at = ${DB_NOW} WHERE deployment = ${deployment}::text RETURNING 1 AS ok`);
      if (seen.length > 0) return;
      await ex.execute(sql`
        INSERT INTO deployments (deployment, first_seen_at, last_seen_at)
        VALUES (${deployment}::text, LEAST(${DB_NOW}, (SELECT min(started_at) FROM workflow_instances WHERE deployment = ${deployment}::text)), ${DB_NOW})
        ON CONFLICT (deployment) DO UPDATE SET last_seen_at = ${DB_NOW}`);
    },

    async getDeployment(deployment) {
      const [r] = await queryRows<{ deployment: string; first_seen_at: unknown; last_seen_at: unknown }>(
        ex,
        sql`SELECT deployment, first_seen_at, last_seen_at FROM deployments WHERE deployment = ${deployment}::text`,
      );
      return r ? { deployment: r.deployment, firstSeenAt: toDate(r.first_seen_at), lastSeenAt: toDate(r.last_seen_at) } : null;
    },

    async adoptInstance(fence, deployment) {
      const rows = await queryRows(
        ex,
        sql`UPDATE workflow_instances SET deployment = ${deployment}::text, replay_refused_by = NULL, replay_refused_error = NULL
            WHERE instance_id = ${fence.instanceId} AND locked_by = ${fence.workerId} AND lock_token = ${fence.token}::bigint
            RETURNING 1 AS ok`,
      );
      return rows.length > 0;
    },

    async refuseInstance(fence, deployment, error) {
      const rows = await queryRows(
        ex,
        sql`UPDATE workflow_instances SET replay_refused_by = ${deployment}::text, replay_refused_error = ${error.slice(0, 500)}::text,
                   locked_by = NULL, locked_at = NULL, lock_expires_at = NULL, lock_token = lock_token + 1, updated_at = ${DB_NOW}
            WHERE instance_id = ${fence.instanceId} AND locked_by = ${fence.workerId} AND lock_token = ${fence.token}::bigint
            RETURNING 1 AS ok`,
      );
      return rows.length > 0;
    },

    async upgradeInstance(instanceId, deployment, check) {
      const rows = await queryRows(
        ex,
        sql`UPDATE workflow_instances SET deployment = ${deployment}::text, replay_refused_by = NULL, replay_refused_error = NULL, updated_at = ${DB_NOW}
            WHERE instance_id = ${instanceId} AND status NOT IN (${TERMINAL})
              AND deployment IS NOT DISTINCT FROM ${check.from}::text AND lock_token = ${check.seenToken}::bigint
              AND (locked_by IS NULL OR lock_expires_at < ${DB_NOW})
            RETURNING 1 AS ok`,
      );
      return rows.length > 0;
    },
  };
}
