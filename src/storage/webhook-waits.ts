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
 *
 * The wait that listens on a hook is bound to it when it begins (`wait_id`:
 * `{hook id}:wait`, or a race's id). Whoever records at that id — the POST,
 * the hook's expiry, or a race's other branch (a message, its timeout, a
 * timer) — does it under the instance's row lock while the instance still
 * waits there, so one record wins; a POST or the expiry that records also
 * withdraws the race's other branches (the subscription's wait marker, the
 * timer row at that id). A POST after another branch won is refused
 * (`lost`): the record at the bound id exists and the hook is still open.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { resolveWaits } from "./transitions.ts";
import { DB_NOW, dbNowPlus, HOOK_LISTENING, isoUtc, toNullableDate } from "./rows.ts";

export type WaitWebhookStatus = "open" | "fired" | "expired" | "cancelled";

export interface WaitWebhookRecord {
  hookId: string;
  run: number;
  status: WaitWebhookStatus;
  expiresAt: Date | null;
  createdAt: Date;
  firedAt: Date | null;
  /** The wait that listens on it (`{hook id}:wait` or a race's id), once one began. */
  waitId: string | null;
}

export type WebhookGoneReason = "fired" | "expired" | "cancelled" | "finished" | "lost";

/** What a POST to a hook found. */
export type WebhookFire =
  | { kind: "unknown" }
  /** Fired, expired or cancelled before, its instance finished (or recurred past it), or another branch of its race won. */
  | { kind: "gone"; reason: WebhookGoneReason }
  /** Accepted; `woken` when the instance was waiting on it and is runnable now. */
  | { kind: "fired"; instanceId: string; woken: boolean };

export interface WebhookWaitsArea {
  /** In the creating step's transaction: the hook's row, its expiry on the database's clock. */
  createWaitWebhook(h: { instanceId: string; run: number; hookId: string; tokenHash: string; expiresInSeconds: number | null }): Promise<{ expiresAt: Date | null }>;
  /**
   * The hook of a wait being registered at `waitId`, bound to it (the caller holds the instance's row lock);
   * `payload` once fired. A hook whose earlier wait already ended (a race it lost, or a wait that took its
   * POST) is `cancelled` for this one: it gives nothing twice.
   */
  bindWaitWebhook(instanceId: string, run: number, hookId: string, waitId: string): Promise<{ status: WaitWebhookStatus; payload: string | null; expiresAt: Date | null } | null>;
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
  /**
   * In a fork's creating transaction, after its history prefix was copied: a row of the fork's own for each
   * of the original's hooks in `tokens` (created in the prefix), keyed by the fork's token, with the
   * original's expiry. A hook whose wait has its record in the copied prefix keeps that outcome (fired,
   * expired, or bound to the race another branch won); any other is open, its wait to begin again.
   */
  forkWaitWebhooks(from: string, to: string, tokens: { hookId: string; tokenHash: string }[]): Promise<{ hookId: string; status: WaitWebhookStatus; expiresAt: Date | null }[]>;
  /** An instance's hooks, oldest first (for views; never the token, which is not stored). */
  listWaitWebhooks(instanceId: string, limit: number): Promise<WaitWebhookRecord[]>;
}

type Sql = ReturnType<typeof sql>;
/** The id the hook's outcome is recorded at: its bound wait's, else `hook.wait()`'s (rows from before the binding). */
const waitIdOf = (h: string) => sql.raw(`coalesce(${h}.wait_id, ${h}.hook_id || ':wait')`);
/** Whether the wait bound to `h` already has its record (a race's other branch won, or that wait took the POST). */
const decided = (h: string, besides: Sql = sql`TRUE`) =>
  sql`(${sql.raw(h)}.wait_id IS NOT NULL AND ${besides} AND EXISTS (SELECT 1 FROM workflow_history x WHERE x.instance_id = ${sql.raw(h)}.instance_id AND x.activity_id = ${sql.raw(h)}.wait_id))`;
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

    async bindWaitWebhook(instanceId, run, hookId, waitId) {
      const [row] = await queryRows<{ status: string; payload: string | null; expires_at: unknown }>(
        ex,
        sql`WITH h AS (
              SELECT h.id, h.status, h.payload, h.expires_at, ${decided("h", sql`h.wait_id <> ${waitId}`)} AS spent
              FROM workflow_webhooks h WHERE h.instance_id = ${instanceId} AND h.run = ${run}::int AND h.hook_id = ${hookId}
            ), bind AS (
              UPDATE workflow_webhooks w SET wait_id = ${waitId} FROM h WHERE w.id = h.id AND NOT h.spent
            )
            SELECT CASE WHEN spent THEN 'cancelled' ELSE status END AS status, CASE WHEN spent THEN NULL ELSE payload END AS payload, expires_at FROM h`,
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
        const [row] = await queryRows<{ status: string; expired: boolean; finished: boolean; lost: boolean; fired: string | null; woken: string | null }>(
          tx,
          resolveWaits({
            before: sql`h AS (
              SELECT h.id, h.status, h.instance_id, h.run, ${waitIdOf("h")} AS wait_id, h.expires_at IS NOT NULL AND h.expires_at <= ${DB_NOW} AS expired,
                     (i.status IN ${FINISHED} OR i.run <> h.run) AS finished, ${decided("h")} AS lost
              FROM workflow_webhooks h JOIN workflow_instances i ON i.instance_id = h.instance_id
              WHERE h.token_hash = ${tokenHash}
            ), fire AS (
              UPDATE workflow_webhooks w
              SET status = 'fired', fired_at = ${DB_NOW},
                  payload = '{"receivedAt":' || to_json(${isoUtc(DB_NOW)})::text || ',' || substr(${delivery}::text, 2)
              FROM h WHERE w.id = h.id AND h.status = 'open' AND NOT h.expired AND NOT h.finished AND NOT h.lost
              RETURNING w.instance_id, w.payload
            )`,
            bound: sql`SELECT fire.instance_id, h.wait_id, 0 AS ord, 'WebhookReceived'::text AS event_type, 'json'::text AS data_type,
                   fire.payload AS event_data, NULL::bytea AS event_data_binary FROM fire, h`,
            stillWaiting: sql`i.status IN ${HOOK_LISTENING} AND i.current_activity_id = b.wait_id`,
            record: "woken",
            onConflict: "first-wins",
            result: sql`SELECT h.status, h.expired, h.finished, h.lost, (SELECT instance_id FROM fire) AS fired, (SELECT instance_id FROM woken) AS woken FROM h`,
          }),
        );
        if (!row) return { kind: "unknown" };
        if (row.fired !== null) return { kind: "fired", instanceId: row.fired, woken: row.woken !== null };
        const reason = row.status !== "open" ? (row.status as "fired" | "expired" | "cancelled") : row.expired ? "expired" : row.finished ? "finished" : "lost";
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
          resolveWaits({
            before: sql`exp AS (
              UPDATE workflow_webhooks h SET status = 'expired' WHERE id IN (${ids}) AND status = 'open'
              RETURNING instance_id, run, hook_id, ${waitIdOf("h")} AS wait_id, expires_at
            )`,
            bound: sql`SELECT instance_id, wait_id, 0 AS ord, 'WebhookExpired'::text AS event_type, 'json'::text AS data_type,
                   json_build_object('hook_id', hook_id, 'expired_at', ${isoUtc(sql`expires_at`)})::text AS event_data, NULL::bytea AS event_data_binary, run
              FROM exp`,
            stillWaiting: sql`i.run = b.run AND i.status IN ${HOOK_LISTENING} AND i.current_activity_id = b.wait_id`,
            record: "woken",
            onConflict: "first-wins",
          }),
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

    async forkWaitWebhooks(from, to, tokens) {
      if (tokens.length === 0) return [];
      const values = sql.join(tokens.map((t) => sql`(${t.hookId}::text, ${t.tokenHash}::text)`), sql`, `);
      const rows = await queryRows<{ hook_id: string; status: string; expires_at: unknown }>(
        ex,
        sql`WITH src AS (
              SELECT o.hook_id, v.token_hash, o.expires_at, x.event_type, ${waitIdOf("o")} AS wait_id
              FROM (VALUES ${values}) AS v(hook_id, token_hash)
              JOIN workflow_instances oi ON oi.instance_id = ${from}
              JOIN workflow_webhooks o ON o.instance_id = oi.instance_id AND o.run = oi.run AND o.hook_id = v.hook_id
              LEFT JOIN workflow_history x ON x.instance_id = ${to} AND x.activity_id = ${waitIdOf("o")}
            )
            INSERT INTO workflow_webhooks (token_hash, instance_id, run, hook_id, expires_at, status, wait_id)
            SELECT src.token_hash, i.instance_id, i.run, src.hook_id, src.expires_at,
                   CASE src.event_type WHEN 'WebhookReceived' THEN 'fired' WHEN 'WebhookExpired' THEN 'expired' ELSE 'open' END,
                   CASE WHEN src.event_type IS NULL THEN NULL ELSE src.wait_id END
            FROM src JOIN workflow_instances i ON i.instance_id = ${to}
            ON CONFLICT (instance_id, run, hook_id) DO NOTHING
            RETURNING hook_id, status, expires_at`,
      );
      return rows.map((r) => ({ hookId: r.hook_id, status: r.status as WaitWebhookStatus, expiresAt: toNullableDate(r.expires_at) }));
    },

    async listWaitWebhooks(instanceId, limit) {
      const rows = await queryRows<{ hook_id: string; run: number; status: string; expires_at: unknown; created_at: unknown; fired_at: unknown; wait_id: string | null }>(
        ex,
        // A hook whose race another branch won is shown as what it is: withdrawn (a POST gets 410 `lost`).
        sql`SELECT hook_id, run, CASE WHEN status = 'open' AND ${decided("h")} THEN 'cancelled' ELSE status END AS status, expires_at, created_at, fired_at, wait_id
            FROM workflow_webhooks h WHERE instance_id = ${instanceId} ORDER BY id LIMIT ${limit}::int`,
      );
      return rows.map((r) => ({
        hookId: r.hook_id,
        run: Number(r.run),
        status: r.status as WaitWebhookStatus,
        expiresAt: toNullableDate(r.expires_at),
        createdAt: toNullableDate(r.created_at)!,
        firedAt: toNullableDate(r.fired_at),
        waitId: r.wait_id,
      }));
    },
  };
}
