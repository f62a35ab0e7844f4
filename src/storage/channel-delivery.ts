/**
 * Waits on channels (a receive that found nothing marks its subscription as
 * waiting, with an optional timeout) and their delivery: per subscriber
 * (`lockWaitingSubscription` + `clearWaiting`), set-based, or by the timeout.
 *
 * Set-based delivery to waiting broadcast subscribers: one transaction per
 * batch instead of one per subscriber (a 1,000-subscriber fan-out was 1,000
 * transactions of six round trips each).
 *
 * The guarantees are the per-subscriber path's (`takeNextMessage` in
 * channels.ts, then `lockWaitingSubscription` + `clearWaiting` below):
 *  - no lost wake-up: the channel lock is taken by its own statement first, so
 *    the statements after it (READ COMMITTED: a snapshot per statement) see
 *    every publish, take and wait that committed under the lock before us;
 *  - in order: each subscriber gets the oldest broadcast message past its
 *    cursor that it may receive (channel-rules.ts `broadcastAvailable`: lookback,
 *    match, receipts), and the cursor advances to it — or, for a matched
 *    wait, a receipt records it;
 *  - a delivery and a timeout or cancel never both win: instance and
 *    subscription rows are locked FOR UPDATE, re-checked against their latest
 *    committed version (still waiting on the same activity id), and rows
 *    someone else holds are SKIPPED rather than waited for — this batch then
 *    never waits on a row lock while holding others, so it cannot deadlock
 *    with a cancel, a per-subscriber delivery or a receive step (instance →
 *    channel lock → subscription, see channel-rules.ts) or the timeout sweep;
 *  - what it leaves: subscribers whose rows were locked, and those with an
 *    unclaimed point-to-point message (consumed through a claim, oldest
 *    first) go through the per-subscriber path, which waits for the locks.
 */
import { sql } from "drizzle-orm";
import { EddaError } from "../core/errors.ts";
import { queryRows, type Executor } from "./database.ts";
import { expireDue, makeRunnable, resolveWaits } from "./transitions.ts";
import { EV } from "../core/model.ts";
import { availableTo, broadcastAvailable, inTransaction, lockChannel } from "./channel-rules.ts";
import { DB_NOW, dbNowPlus, isoUtc, MESSAGE_COLUMNS, toChannelMessage, tsParam, WAITING, type Row } from "./rows.ts";
import type { ChannelMessageRecord, ChannelMode, MatchDocument, Payload } from "./records.ts";

export interface WaitingSubscriber {
  instanceId: string;
  channel: string;
  mode: ChannelMode;
  activityId: string;
}

/** A wait that a batched delivery satisfied: the message `seq` was recorded at `activityId`. */
export interface DeliveredWait {
  instanceId: string;
  activityId: string;
  seq: number;
}

/** Waits on channels and their delivery: per subscriber, batched, or by their timeout. */
export interface ChannelDeliveryArea {
  /** Mark the subscription as waiting (activity id, the wait's match, optional timeout: a time, or seconds from the database's now). */
  setWaiting(instanceId: string, channel: string, activityId: string, timeout: Date | number | null, match?: MatchDocument | null): Promise<void>;
  /**
   * In a transaction: lock the subscription row if it still waits on
   * `activityId` (FOR UPDATE), so a delivery and a timeout never both win.
   */
  lockWaitingSubscription(instanceId: string, channel: string, activityId: string): Promise<boolean>;
  /**
   * Clear the wait; if it was set and the instance is waiting for a message,
   * the instance becomes `running` in the same statement (a delivery makes it runnable).
   */
  clearWaiting(instanceId: string, channel: string): Promise<void>;
  /**
   * Batched delivery, one transaction under the channel lock: up to `limit`
   * broadcast subscribers of `channel` waiting in a receive each get their
   * next broadcast message (cursor advanced, history event from `record` at
   * the wait's activity id, wait cleared, instance runnable). Subscribers
   * whose rows are locked by someone else (SKIP LOCKED) or that have an
   * unclaimed point-to-point message are left for the per-subscriber path.
   */
  deliverBroadcast(channel: string, limit: number, record: (msg: ChannelMessageRecord) => { eventType: string; data: Payload }): Promise<DeliveredWait[]>;
  /** Subscribers currently waiting on a channel that have a message available. */
  findWaitingSubscribersWithMessages(limit: number, channel?: string): Promise<WaitingSubscriber[]>;
  /** Waits whose timeout passed (bounded, SKIP LOCKED): record `MessageTimeout`, clear the wait, make runnable. */
  expireMessageWaits(limit: number, onlyInstanceId?: string): Promise<string[]>;
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

export function channelDeliveryArea(ex: Executor): ChannelDeliveryArea {
  return {
    async deliverBroadcast(channel, limit, record) {
      return inTransaction(ex, async (tx) => {
        await lockChannel(tx, channel);
        const picked = await queryRows<{ sub_id: string | number; instance_id: string; activity_id: string; seq: string | number; matched: boolean }>(
          tx,
          sql`
          SELECT s.id AS sub_id, s.instance_id, s.activity_id, n.id AS seq, s.match IS NOT NULL AS matched
          FROM workflow_instances i
          JOIN channel_subscriptions s ON s.instance_id = i.instance_id
          CROSS JOIN LATERAL (
            SELECT m.id FROM channel_messages m
            WHERE m.channel = s.channel AND ${broadcastAvailable("m", "s")}
            ORDER BY m.id LIMIT 1
          ) n
          WHERE s.channel = ${channel} AND s.mode = 'broadcast' AND s.activity_id IS NOT NULL
            AND i.status = ${WAITING.message}
            AND NOT EXISTS (
              SELECT 1 FROM channel_messages t
              WHERE t.target_instance_id = s.instance_id AND t.channel = s.channel
                AND NOT EXISTS (SELECT 1 FROM channel_message_claims cl WHERE cl.message_id = t.message_id))
          ORDER BY s.id
          LIMIT ${limit}::int
          FOR UPDATE OF i, s SKIP LOCKED`,
        );
        if (picked.length === 0) return [];

        const seqs = [...new Set(picked.map((p) => Number(p.seq)))];
        const messages = await queryRows<Row>(
          tx,
          sql`SELECT ${MESSAGE_COLUMNS} FROM channel_messages
              WHERE channel = ${channel} AND id IN (${sql.join(seqs.map((s) => sql`${s}::bigint`), sql`, `)})`,
        );
        const payloads = messages.map((row) => {
          const msg = toChannelMessage(row);
          const { eventType, data } = record(msg);
          return data.type === "binary"
            ? { seq: msg.seq, event_type: eventType, data_type: "binary", event_data: null, event_data_hex: hex(data.bytes) }
            : { seq: msg.seq, event_type: eventType, data_type: "json", event_data: data.json, event_data_hex: null };
        });
        const deliveries = picked.map((p, ord) => ({ ord, sub_id: String(p.sub_id), instance_id: p.instance_id, activity_id: p.activity_id, seq: Number(p.seq), matched: p.matched }));

        // One statement: advance the cursors (and their mirror) — or, for a matched
        // wait, only write a receipt — record the message, clear the waits, make the instances runnable.
        // Every broadcast delivery leaves a receipt: it is who the message woke (the received-events view).
        await tx.execute(
          resolveWaits({
            before: sql`d AS MATERIALIZED (
            SELECT * FROM json_to_recordset(${JSON.stringify(deliveries)}::json)
              AS d(ord int, sub_id bigint, instance_id text, activity_id text, seq bigint, matched boolean)
          ), p AS (
            SELECT * FROM json_to_recordset(${JSON.stringify(payloads)}::json)
              AS p(seq bigint, event_type text, data_type text, event_data text, event_data_hex text)
          ), adv AS (
            UPDATE channel_subscriptions s
            SET cursor_message_id = CASE WHEN d.matched THEN s.cursor_message_id ELSE d.seq END, activity_id = NULL, timeout_at = NULL, match = NULL
            FROM d WHERE s.id = d.sub_id
          ), cur AS (
            INSERT INTO channel_delivery_cursors (channel, instance_id, last_delivered_id)
            SELECT ${channel}::text, instance_id, seq FROM d WHERE NOT d.matched
            ON CONFLICT (channel, instance_id) DO UPDATE SET last_delivered_id = excluded.last_delivered_id, updated_at = ${DB_NOW}
          ), receipt AS (
            INSERT INTO channel_message_receipts (instance_id, message_id)
            SELECT d.instance_id, m.message_id FROM d JOIN channel_messages m ON m.id = d.seq WHERE d.matched OR m.target_instance_id IS NULL
            ON CONFLICT DO NOTHING
          )`,
            bound: sql`SELECT d.instance_id, d.activity_id AS wait_id, d.ord, p.event_type, p.data_type, p.event_data, decode(p.event_data_hex, 'hex') AS event_data_binary
              FROM d JOIN p ON p.seq = d.seq`,
            own: "receives",
            record: "always",
            onConflict: "error",
            stillWaiting: sql`i.status = ${WAITING.message}`,
          }),
        );
        return picked.map((p) => ({ instanceId: p.instance_id, activityId: p.activity_id, seq: Number(p.seq) }));
      });
    },

    /** `timeout`: an absolute time, or seconds from the database's clock. */
    async setWaiting(instanceId, channel, activityId, timeout, match = null) {
      const timeoutSql = timeout === null ? sql`NULL` : typeof timeout === "number" ? dbNowPlus(timeout) : tsParam(timeout);
      const matchSql = match === null ? sql`NULL::jsonb` : sql`${JSON.stringify(match)}::jsonb`;
      const rows = await queryRows(
        ex,
        sql`UPDATE channel_subscriptions SET activity_id = ${activityId}, timeout_at = ${timeoutSql}, match = ${matchSql}
            WHERE instance_id = ${instanceId} AND channel = ${channel} RETURNING 1 AS ok`,
      );
      if (rows.length === 0) throw new EddaError(`instance ${instanceId} is not subscribed to channel "${channel}"`);
    },

    /**
     * Clear the wait; when it was set and the instance is waiting for a message,
     * the instance becomes `running` in the same statement (a delivered message
     * makes it runnable, like a fired timer or an expired wait).
     */
    async clearWaiting(instanceId, channel) {
      await ex.execute(sql`
        WITH w AS (
          SELECT id, instance_id FROM channel_subscriptions
          WHERE instance_id = ${instanceId} AND channel = ${channel} AND activity_id IS NOT NULL
          FOR UPDATE
        ), clr AS (
          UPDATE channel_subscriptions s SET activity_id = NULL, timeout_at = NULL, match = NULL FROM w WHERE s.id = w.id
        )
        ${makeRunnable({ where: sql`instance_id IN (SELECT instance_id FROM w) AND status = ${WAITING.message}` })}`);
    },

    /**
     * In the module's lock order (instance row, channel lock, subscription row),
     * so a delivery racing a cancel, a receive step or another delivery waits
     * instead of deadlocking. Runs in the caller's transaction.
     */
    async lockWaitingSubscription(instanceId, channel, activityId) {
      const inst = await queryRows(ex, sql`SELECT 1 AS ok FROM workflow_instances WHERE instance_id = ${instanceId} AND status = ${WAITING.message} FOR UPDATE`);
      if (inst.length === 0) return false;
      await lockChannel(ex, channel);
      const rows = await queryRows(
        ex,
        sql`SELECT 1 AS ok FROM channel_subscriptions
            WHERE instance_id = ${instanceId} AND channel = ${channel} AND activity_id = ${activityId}
            FOR UPDATE`,
      );
      return rows.length > 0;
    },

    async findWaitingSubscribersWithMessages(limit, channel) {
      const channelFilter = channel === undefined ? sql`` : sql`AND s.channel = ${channel}`;
      const rows = await queryRows<{ instance_id: string; channel: string; mode: ChannelMode; activity_id: string }>(
        ex,
        sql`SELECT s.instance_id, s.channel, s.mode, s.activity_id
            FROM channel_subscriptions s JOIN workflow_instances i ON i.instance_id = s.instance_id
            WHERE s.activity_id IS NOT NULL AND i.status = ${WAITING.message} ${channelFilter}
              AND EXISTS (SELECT 1 FROM channel_messages m WHERE ${availableTo("m", "s")})
            ORDER BY s.id LIMIT ${limit}::int`,
      );
      return rows.map((r) => ({ instanceId: r.instance_id, channel: r.channel, mode: r.mode, activityId: r.activity_id }));
    },

    /**
     * One statement, bounded. The instance row and its subscription are locked
     * together with SKIP LOCKED: a wait whose instance or subscription someone
     * holds (a delivery in flight, a cancel, a concluding step) is left for the
     * next sweep, and the statement never waits for a row while holding another
     * (it used to lock the subscription and then wait for the instance, the
     * reverse of a delivery's order: a deadlock).
     */
    async expireMessageWaits(limit, onlyInstanceId) {
      const only = onlyInstanceId === undefined ? sql`` : sql`AND s.instance_id = ${onlyInstanceId}`;
      const rows = await queryRows<{ instance_id: string }>(
        ex,
        expireDue({
          due: sql`SELECT s.id, s.instance_id, s.channel, s.activity_id, s.timeout_at
            FROM channel_subscriptions s JOIN workflow_instances i ON i.instance_id = s.instance_id
            WHERE s.activity_id IS NOT NULL AND s.timeout_at <= ${DB_NOW} ${only} AND i.status <> 'quarantined'
            ORDER BY s.timeout_at, s.id
            LIMIT ${limit}::int
            FOR UPDATE OF i, s SKIP LOCKED`,
          withdraw: sql`UPDATE channel_subscriptions s SET activity_id = NULL, timeout_at = NULL, match = NULL FROM due WHERE s.id = due.id`,
          eventType: EV.MessageTimeout,
          data: sql`json_build_object('channel', channel, 'timeout_at', ${isoUtc(sql`timeout_at`)})`,
          order: sql`timeout_at, id`,
          own: "receives",
          stillWaiting: sql`i.status = ${WAITING.message}`,
        }),
      );
      return rows.map((r) => r.instance_id);
    },
  };
}
