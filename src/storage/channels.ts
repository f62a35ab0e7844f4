/**
 * Channels: publish, subscribe, take the next message, retention. The
 * delivery rules per mode, the ordering and wake-up guarantees and the lock
 * order are in channel-rules.ts, with the SQL that states them; waits on a
 * channel and their delivery are in channel-delivery.ts.
 */
import { sql } from "drizzle-orm";
import { ChannelModeConflictError } from "../core/errors.ts";
import { availableTo, channelLock, inTransaction, lockChannel } from "./channel-rules.ts";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW, MESSAGE_COLUMNS, payloadParams, SUBSCRIPTION_COLUMNS, toChannelMessage, toSubscription, type Row } from "./rows.ts";
import type { ChannelMessageRecord, ChannelMode, MatchDocument, Payload, SubscriptionRecord } from "./records.ts";

export interface NewChannelMessage {
  channel: string;
  /** Generated (UUID) when omitted. */
  messageId?: string;
  data: Payload;
  metadata?: string | null;
  /** Point-to-point: only this instance can ever receive it. */
  targetInstanceId?: string | null;
}

export interface SubscribeOptions {
  /**
   * Event lookback: a new broadcast subscription also sees the channel's
   * messages published after the instance started (not only later ones).
   */
  lookback?: boolean;
}

/** Channels: publish, subscribe, take the next message, retention. */
export interface ChannelsArea {
  publishMessage(msg: NewChannelMessage): Promise<ChannelMessageRecord>;
  /**
   * Subscribe (idempotent). A broadcast subscriber's cursor starts at the
   * channel's latest message (it sees only later messages). Throws
   * ChannelModeConflictError when the channel is in use with another mode.
   */
  subscribe(instanceId: string, channel: string, mode: ChannelMode, opts?: SubscribeOptions): Promise<void>;
  unsubscribe(instanceId: string, channel: string): Promise<void>;
  getSubscription(instanceId: string, channel: string): Promise<SubscriptionRecord | null>;
  /**
   * The next message for this subscriber, consumed atomically: broadcast
   * advances its cursor; competing claims it (exactly one claimer wins, SKIP
   * LOCKED); direct / point-to-point messages only for their target.
   * `match`: only broadcast messages whose document contains it, received
   * once per instance (a receipt, the cursor stays); `undefined` uses the
   * match of the wait in progress.
   */
  takeNextMessage(instanceId: string, channel: string, match?: MatchDocument | null): Promise<ChannelMessageRecord | null>;
  /** Delete messages older than the retention that no claim of a recent message depends on. */
  cleanupChannelMessages(olderThanSeconds: number, limit: number): Promise<number>;
}

const MODES: readonly ChannelMode[] = ["broadcast", "competing", "direct"];

export function channelsArea(ex: Executor): ChannelsArea {
  return {
    /**
     * One statement, also outside a transaction: the channel lock is taken in a
     * MATERIALIZED CTE that the INSERT scans, so the message id (nextval, computed
     * per scanned row) is drawn only once the lock is held, and the lock lasts
     * until the surrounding (or implicit) transaction commits.
     */
    async publishMessage(msg) {
      const p = payloadParams(msg.data);
      const messageId = msg.messageId ?? crypto.randomUUID();
      const [row] = await queryRows<Row>(
        ex,
        sql`WITH locked AS MATERIALIZED (SELECT ${channelLock(msg.channel)} AS l)
            INSERT INTO channel_messages (channel, message_id, data_type, data, data_binary, metadata, target_instance_id)
            SELECT ${msg.channel}::text, ${messageId}::text, ${p.dataType}, ${p.text}, ${p.binary}, ${msg.metadata ?? null}::text,
                   ${msg.targetInstanceId ?? null}::text
            FROM locked
            RETURNING ${MESSAGE_COLUMNS}`,
      );
      if (!row) throw new Error("publishMessage: INSERT returned no row");
      return toChannelMessage(row);
    },

    /**
     * Idempotent for the same mode. Conflicts: the same (instance, channel) with
     * another mode, or broadcast vs competing subscribers on one channel (`direct`
     * subscriptions are per instance and coexist with either).
     */
    async subscribe(instanceId, channel, mode, opts = {}) {
      if (!MODES.includes(mode)) throw new TypeError(`invalid channel mode: ${String(mode)}`);
      const lookback = opts.lookback === true && mode === "broadcast";
      // Lookback: the cursor starts at the last message published a minute before the
      // instance started (found through the (channel, published_at) index), and
      // `lookback_from` drops what is older than the start among the messages after it.
      // The minute covers a publish whose transaction began before the start but drew
      // its id later; ids are drawn under the channel lock, in commit order.
      const startedAt = sql`(SELECT started_at FROM workflow_instances WHERE instance_id = ${instanceId})`;
      const cursor = lookback
        ? sql`(SELECT coalesce((SELECT id FROM channel_messages WHERE channel = ${channel} AND published_at <= ${startedAt} - interval '60 seconds'
                                ORDER BY published_at DESC, id DESC LIMIT 1), 0))`
        : sql`(SELECT coalesce(max(id), 0) FROM channel_messages WHERE channel = ${channel})`;
      const [row] = await inTransaction(ex, async (tx) => {
        await lockChannel(tx, channel, instanceId);
        return queryRows<{ own_mode: string | null; other_mode: string | null }>(
          tx,
          sql`
          WITH own AS (
            SELECT mode FROM channel_subscriptions WHERE instance_id = ${instanceId} AND channel = ${channel}
          ), other AS (
            SELECT mode FROM channel_subscriptions
            WHERE channel = ${channel} AND instance_id <> ${instanceId}
              AND ${mode}::text <> 'direct' AND mode <> 'direct' AND mode <> ${mode}::text
            LIMIT 1
          ), ins AS (
            INSERT INTO channel_subscriptions (instance_id, channel, mode, cursor_message_id, lookback_from)
            SELECT ${instanceId}, ${channel}, ${mode}::text,
                   CASE WHEN ${mode}::text = 'broadcast' THEN ${cursor} END,
                   ${lookback ? startedAt : sql`NULL::timestamptz`}
            WHERE NOT EXISTS (SELECT 1 FROM own) AND NOT EXISTS (SELECT 1 FROM other)
            ON CONFLICT (instance_id, channel) DO NOTHING
          )
          SELECT (SELECT mode FROM own) AS own_mode, (SELECT mode FROM other) AS other_mode`,
        );
      });
      if (row?.own_mode && row.own_mode !== mode) {
        throw new ChannelModeConflictError(`instance ${instanceId} is already subscribed to channel "${channel}" in ${row.own_mode} mode, not ${mode}`);
      }
      if (!row?.own_mode && row?.other_mode) {
        throw new ChannelModeConflictError(`channel "${channel}" is used in ${row.other_mode} mode; cannot subscribe in ${mode} mode`);
      }
    },

    async unsubscribe(instanceId, channel) {
      await ex.execute(sql`
        WITH cur AS (DELETE FROM channel_delivery_cursors WHERE instance_id = ${instanceId} AND channel = ${channel})
        DELETE FROM channel_subscriptions WHERE instance_id = ${instanceId} AND channel = ${channel}`);
    },

    async getSubscription(instanceId, channel) {
      const [row] = await queryRows<Row>(
        ex,
        sql`SELECT ${SUBSCRIPTION_COLUMNS}
            FROM channel_subscriptions WHERE instance_id = ${instanceId} AND channel = ${channel}`,
      );
      return row ? toSubscription(row) : null;
    },

    /**
     * Under the channel lock, one statement: lock the subscription row (a
     * concurrent timeout sweep skips it), then either advance the cursor
     * (broadcast, mirrored in channel_delivery_cursors) / claim a point-to-point
     * message, or claim the oldest unclaimed message (competing) and move the
     * competing scan hint past it. The claim's primary key with ON CONFLICT DO
     * NOTHING guarantees one claimer per message; the channel lock already
     * serializes claimers, so the candidate row is locked without SKIP LOCKED — a
     * skipped row would end up behind the cursor and never be delivered.
     */
    async takeNextMessage(instanceId, channel, match) {
      const matchSql = match === undefined ? sql`match` : match === null ? sql`NULL::jsonb` : sql`${JSON.stringify(match)}::jsonb`;
      const rows = await inTransaction(ex, async (tx) => {
        await lockChannel(tx, channel, instanceId);
        return queryRows<Row>(
          tx,
          sql`
          WITH sub AS (
            SELECT instance_id, channel, mode, cursor_message_id, lookback_from, ${matchSql} AS match FROM channel_subscriptions
            WHERE instance_id = ${instanceId} AND channel = ${channel}
            FOR UPDATE
          ), seq_msg AS (
            SELECT m.* FROM channel_messages m JOIN sub s ON ${availableTo("m", "s")}
            WHERE s.mode <> 'competing'
            ORDER BY m.id LIMIT 1
          ), adv AS (
            UPDATE channel_subscriptions s SET cursor_message_id = seq_msg.id
            FROM seq_msg WHERE s.instance_id = ${instanceId} AND s.channel = ${channel} AND seq_msg.target_instance_id IS NULL
              AND (SELECT match FROM sub) IS NULL
          ), cur AS (
            INSERT INTO channel_delivery_cursors (channel, instance_id, last_delivered_id)
            SELECT ${channel}, ${instanceId}, id FROM seq_msg WHERE target_instance_id IS NULL AND (SELECT match FROM sub) IS NULL
            ON CONFLICT (channel, instance_id) DO UPDATE SET last_delivered_id = excluded.last_delivered_id, updated_at = ${DB_NOW}
          ), receipt AS (
            -- a matched wait's record that it took the message (its cursor stays); for any broadcast, who took it
            INSERT INTO channel_message_receipts (instance_id, message_id)
            SELECT ${instanceId}, message_id FROM seq_msg WHERE target_instance_id IS NULL
            ON CONFLICT DO NOTHING
          ), own_claim AS (
            INSERT INTO channel_message_claims (message_id, instance_id)
            SELECT message_id, ${instanceId} FROM seq_msg WHERE target_instance_id IS NOT NULL
            ON CONFLICT (message_id) DO NOTHING
          ), cand AS (
            SELECT m.* FROM channel_messages m
            WHERE m.channel = ${channel} AND EXISTS (SELECT 1 FROM sub s WHERE s.mode = 'competing' AND ${availableTo("m", "s")})
            ORDER BY m.id LIMIT 1
            FOR UPDATE OF m
          ), claim AS (
            INSERT INTO channel_message_claims (message_id, instance_id)
            SELECT message_id, ${instanceId} FROM cand
            ON CONFLICT (message_id) DO NOTHING
            RETURNING message_id
          ), claim_adv AS (
            -- seq_msg (non-competing) and cand (competing) exclude each other: never two updates of one row
            UPDATE channel_subscriptions s SET cursor_message_id = cand.id
            FROM cand WHERE s.instance_id = ${instanceId} AND s.channel = ${channel}
              AND cand.message_id IN (SELECT message_id FROM claim)
              -- a matched take skips what it does not match: the scan hint must not pass it
              AND (SELECT match FROM sub) IS NULL
          )
          SELECT ${MESSAGE_COLUMNS} FROM seq_msg
          UNION ALL
          SELECT ${MESSAGE_COLUMNS} FROM cand WHERE message_id IN (SELECT message_id FROM claim)`,
        );
      });
      return rows[0] ? toChannelMessage(rows[0]) : null;
    },

    /**
     * Delete messages older than the retention, except one claimed within the
     * retention window (its claim is recent evidence of consumption). Claims go
     * only with their own (old) message, by the foreign key's cascade; claims of
     * recent messages are never touched.
     */
    async cleanupChannelMessages(olderThanSeconds, limit) {
      const cutoff = sql`(${DB_NOW} - make_interval(secs => ${olderThanSeconds}::float8))`;
      const rows = await queryRows(
        ex,
        sql`
        WITH old AS (
          SELECT m.id FROM channel_messages m
          WHERE m.published_at < ${cutoff}
            AND NOT EXISTS (SELECT 1 FROM channel_message_claims c WHERE c.message_id = m.message_id AND c.claimed_at >= ${cutoff})
          ORDER BY m.id
          LIMIT ${limit}::int
          FOR UPDATE SKIP LOCKED
        )
        DELETE FROM channel_messages m USING old WHERE m.id = old.id RETURNING 1 AS ok`,
      );
      return rows.length;
    },
  };
}
