/**
 * Per-wait webhook URLs, storage side (`workflow_webhooks`).
 *
 * A hook is `open` from its creation (in the creating step's transaction)
 * until the first POST fires it, its expiry passes (the sweep), or the
 * instance ends from outside (`endInstance` cancels it). Every change to a
 * hook happens under its instance's row lock, taken first (instance rows
 * before other rows, as everywhere): a POST and the step that registers the
 * wait serialize on it, so the POST either records the wait's outcome (the
 * instance was already waiting) or leaves the request in the row for the
 * wait's `prepare` to take — never both, never neither. Only the SHA-256 of
 * the token is stored.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, dbNowPlus, isoUtc, toNullableDate } from "./rows.ts";

export type WaitWebhookStatus = "open" | "fired" | "expired" | "cancelled";

export interface WaitWebhookRecord {
  hookId: string;
  run: number;
  status: WaitWebhookStatus;
  expiresAt: Date | null;
  createdAt: Date;
  firedAt: Date | null;
}

/** What a POST to a hook found. */
export type WebhookFire =
  | { kind: "unknown" }
  /** Fired, expired or cancelled before, or its instance finished (or recurred past it). */
  | { kind: "gone"; reason: "fired" | "expired" | "cancelled" | "finished" }
  /** Accepted; `woken` when the instance was waiting on it and is runnable now. */
  | { kind: "fired"; instanceId: string; woken: boolean };

export interface WebhookWaitsArea {
  /** In the creating step's transaction: the hook's row, its expiry on the database's clock. */
  createWaitWebhook(h: { instanceId: string; run: number; hookId: string; tokenHash: string; expiresInSeconds: number | null }): Promise<{ expiresAt: Date | null }>;
  /** The hook of a wait being registered (the caller holds the instance's row lock); `payload` once fired. */
  waitWebhookState(instanceId: string, run: number, hookId: string): Promise<{ status: WaitWebhookStatus; payload: string | null; expiresAt: Date | null } | null>;
  /**
   * A POST: fire the hook whose token hashes to `tokenHash` with `delivery`
   * (a JSON object; `receivedAt` is added from the database's clock), and when
   * its instance waits on it record `WebhookReceived` and make it runnable —
   * one transaction, under the instance's row lock. Applies once.
   */
  fireWaitWebhook(tokenHash: string, delivery: string): Promise<WebhookFire>;
  /** Record the due expiries (at most `limit`, or only `onlyInstanceId`'s): `expired`, and a waiting instance gets `WebhookExpired` and runs. */
  expireWaitWebhooks(limit: number, onlyInstanceId?: string): Promise<string[]>;
  /** Instances with a due open hook, for the one-at-a-time pass (no locks). */
  findDueWebhookInstances(limit: number): Promise<string[]>;
  /** An instance's hooks, oldest first (for views; never the token, which is not stored). */
  listWaitWebhooks(instanceId: string, limit: number): Promise<WaitWebhookRecord[]>;
}

const waitIdOf = (hookId: ReturnType<typeof sql>) => sql`(${hookId} || ':wait')`;
const FINISHED = sql`('completed', 'failed', 'cancelled', 'compensating')`;

export function webhookWaitsArea(ex: Executor): WebhookWaitsArea {
  return {
    async createWaitWebhook(h) {
      const expiry = h.expiresInSeconds === null ? sql`NULL::timestamptz` : dbNowPlus(h.expiresInSeconds);
      const [row] = await queryRows<{ expires_at: unknown }>(
        ex,
        sql`INSERT INTO workflow_webhooks (token_hash, instance_id, run, hook_id, expires_at)
            VALUES (${h.tokenHash}, ${h.instanceId}, ${h.run}::int, ${h.hookId}, ${expiry})
            ON CONFLICT (instance_id, run, hook_id) DO UPDATE SET token_hash = excluded.token_hash, expires_at = excluded.expires_at, status = 'open', payload = NULL, fired_at = NULL
            RETURNING expires_at`,
      );
      return { expiresAt: toNullableDate(row?.expires_at) };
    },

    async waitWebhookState(instanceId, run, hookId) {
      const [row] = await queryRows<{ status: string; payload: string | null; expires_at: unknown }>(
        ex,
        sql`SELECT status, payload, expires_at FROM workflow_webhooks WHERE instance_id = ${instanceId} AND run = ${run}::int AND hook_id = ${hookId}`,
      );
      return row ? { status: row.status as WaitWebhookStatus, payload: row.payload, expiresAt: toNullableDate(row.expires_at) } : null;
    },

    fireWaitWebhook(tokenHash, delivery) {
      if (!delivery.startsWith("{")) throw new TypeError("a webhook delivery is a JSON object");
      return ex.transaction(async (tx) => {
        // The instance's row lock first: a step registering the wait (or a concurrent POST) goes before or after, whole.
        const [owner] = await queryRows<{ instance_id: string }>(
          tx,
          sql`SELECT i.instance_id FROM workflow_webhooks h JOIN workflow_instances i ON i.instance_id = h.instance_id
              WHERE h.token_hash = ${tokenHash} FOR UPDATE OF i`,
        );
        if (!owner) return { kind: "unknown" };
        // A new statement: it sees what the lock holder committed.
        const [row] = await queryRows<{ status: string; expired: boolean; finished: boolean; fired: string | null; woken: string | null }>(
          tx,
          sql`
          WITH h AS (
            SELECT h.id, h.status, h.instance_id, h.run, h.hook_id, h.expires_at IS NOT NULL AND h.expires_at <= ${DB_NOW} AS expired,
                   (i.status IN ${FINISHED} OR i.run <> h.run) AS finished, i.status AS instance_status, i.current_activity_id
            FROM workflow_webhooks h JOIN workflow_instances i ON i.instance_id = h.instance_id
            WHERE h.token_hash = ${tokenHash}
          ), fire AS (
            UPDATE workflow_webhooks w
            SET status = 'fired', fired_at = ${DB_NOW},
                payload = '{"receivedAt":' || to_json(${isoUtc(DB_NOW)})::text || ',' || substr(${delivery}::text, 2)
            FROM h WHERE w.id = h.id AND h.status = 'open' AND NOT h.expired AND NOT h.finished
            RETURNING w.instance_id, w.hook_id, w.payload
          ), woken AS (
            UPDATE workflow_instances i SET status = 'running', updated_at = ${DB_NOW}
            FROM fire, h
            WHERE i.instance_id = fire.instance_id AND h.instance_status = 'waiting_for_webhook' AND h.current_activity_id = ${waitIdOf(sql`fire.hook_id`)}
            RETURNING i.instance_id
          ), hist AS (
            INSERT INTO workflow_history (instance_id, activity_id, event_type, data_type, event_data)
            SELECT fire.instance_id, ${waitIdOf(sql`fire.hook_id`)}, 'WebhookReceived', 'json', fire.payload FROM fire, woken
            ON CONFLICT (instance_id, activity_id) DO NOTHING
          )
          SELECT h.status, h.expired, h.finished, (SELECT instance_id FROM fire) AS fired, (SELECT instance_id FROM woken) AS woken FROM h`,
        );
        if (!row) return { kind: "unknown" };
        if (row.fired !== null) return { kind: "fired", instanceId: row.fired, woken: row.woken !== null };
        const reason = row.status !== "open" ? (row.status as "fired" | "expired" | "cancelled") : row.expired ? "expired" : "finished";
        return { kind: "gone", reason };
      });
    },

    expireWaitWebhooks(limit, onlyInstanceId) {
      const only = onlyInstanceId === undefined ? sql`` : sql`AND h.instance_id = ${onlyInstanceId}`;
      return ex.transaction(async (tx) => {
        // Lock a batch (SKIP LOCKED: a concurrent sweep takes another, and an instance a step or a POST holds waits for the next sweep) …
        const due = await queryRows<{ id: number | string }>(
          tx,
          sql`SELECT h.id FROM workflow_webhooks h JOIN workflow_instances i ON i.instance_id = h.instance_id
              WHERE h.status = 'open' AND h.expires_at <= ${DB_NOW} AND i.status <> 'quarantined' ${only}
              ORDER BY h.expires_at, h.id LIMIT ${limit}::int
              FOR UPDATE OF i, h SKIP LOCKED`,
        );
        if (due.length === 0) return [];
        const ids = sql.join(due.map((d) => sql`${Number(d.id)}::bigint`), sql`, `);
        // … then, in a statement that sees the locked rows as they are, expire them and wake the instances that wait on them.
        const rows = await queryRows<{ instance_id: string }>(
          tx,
          sql`
          WITH exp AS (
            UPDATE workflow_webhooks SET status = 'expired' WHERE id IN (${ids}) AND status = 'open'
            RETURNING instance_id, run, hook_id, expires_at
          ), woken AS (
            UPDATE workflow_instances i SET status = 'running', updated_at = ${DB_NOW}
            FROM exp WHERE i.instance_id = exp.instance_id AND i.run = exp.run AND i.status = 'waiting_for_webhook' AND i.current_activity_id = ${waitIdOf(sql`exp.hook_id`)}
            RETURNING i.instance_id, exp.hook_id, exp.expires_at
          ), hist AS (
            INSERT INTO workflow_history (instance_id, activity_id, event_type, data_type, event_data)
            SELECT instance_id, ${waitIdOf(sql`hook_id`)}, 'WebhookExpired', 'json', json_build_object('hook_id', hook_id, 'expired_at', ${isoUtc(sql`expires_at`)})::text FROM woken
            ON CONFLICT (instance_id, activity_id) DO NOTHING
          )
          SELECT DISTINCT instance_id FROM exp`,
        );
        return rows.map((r) => r.instance_id);
      });
    },

    async findDueWebhookInstances(limit) {
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        sql`SELECT h.instance_id, min(h.expires_at) AS due FROM workflow_webhooks h JOIN workflow_instances i ON i.instance_id = h.instance_id
            WHERE h.status = 'open' AND h.expires_at <= ${DB_NOW} AND i.status <> 'quarantined'
            GROUP BY h.instance_id ORDER BY due LIMIT ${limit}::int`,
      );
      return rows.map((r) => r.instance_id);
    },

    async listWaitWebhooks(instanceId, limit) {
      const rows = await queryRows<{ hook_id: string; run: number; status: string; expires_at: unknown; created_at: unknown; fired_at: unknown }>(
        ex,
        sql`SELECT hook_id, run, status, expires_at, created_at, fired_at FROM workflow_webhooks
            WHERE instance_id = ${instanceId} ORDER BY id LIMIT ${limit}::int`,
      );
      return rows.map((r) => ({
        hookId: r.hook_id,
        run: Number(r.run),
        status: r.status as WaitWebhookStatus,
        expiresAt: toNullableDate(r.expires_at),
        createdAt: toNullableDate(r.created_at)!,
        firedAt: toNullableDate(r.fired_at),
      }));
    },
  };
}
