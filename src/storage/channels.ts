/**
 * Channels: publish, subscribe, take (waits and their delivery: channel-delivery.ts).
 *
 * Delivery rules, per subscription mode:
 *  - broadcast: messages after the subscriber's cursor (which starts at the
 *    channel's latest message when it subscribes), cursor advanced on take;
 *  - competing: any message of the channel nobody has claimed, including those
 *    published before the subscriber existed (a queue never loses work); a
 *    take claims it with an INSERT into channel_message_claims, so exactly one
 *    subscriber gets each message. The subscription's cursor is only a scan
 *    hint here: every message visible to it up to the cursor is claimed (the
 *    channel lock makes "the oldest unclaimed message" exact), so a take does
 *    not re-check the whole retention window of claimed messages;
 *  - direct: messages targeted at this instance only.
 * A point-to-point message (target_instance_id set) is visible to its target
 * only, whatever the mode, and is consumed through a claim rather than a
 * cursor: one sent before the receiver subscribed or waited is not lost
 * (the "mailbox problem"), and it is delivered exactly once.
 *
 * Event matching (waitEvent's `match`): a wait in progress keeps its match on
 * the subscription; a broadcast message is available to it only when the
 * message's document `edda_message_doc(...)` = `{ data, meta }` contains the
 * match (jsonb `@>`, GIN-indexed — migration 0002). A matched take records a
 * receipt instead of moving the cursor, so events of another match that came
 * before it stay visible to the instance's later waits, and none is received
 * twice. A lookback subscription (an event wait's) also sees messages
 * published after the instance started (`lookback_from`).
 *
 * Ordering and wake-ups: publish, subscribe and take hold a per-channel
 * transaction-scoped advisory lock until their transaction commits. Hence
 *  - a channel's messages commit in id order, so a cursor never moves past a
 *    message that commits later with a smaller id;
 *  - a receive that found nothing and suspends (take → setWaiting → conclude,
 *    one transaction) and a publish are serialized: either the take sees the
 *    message, or the publish commits after the wait is visible and its
 *    post-commit wake-up finds the waiter. No lost wake-ups.
 *
 * Lock order, everywhere: an instance row, then the channel lock, then that
 * instance's subscription (and timer) rows, then message rows. A cancel
 * (instance → its timers and subscriptions), a delivery (`lockWaitingSubscription`),
 * a receive or subscribe in a step (`lockChannel` with the instance) all
 * follow it, so they wait for each other instead of deadlocking. The sweeps
 * and the set-based broadcast delivery take instance and subscription/timer
 * rows together with SKIP LOCKED: they never wait for a row while holding
 * another. One path takes the channel lock first: a publish inside a step,
 * whose conclusion then updates its own instance row — that instance is
 * running under the step's lease, so no one holding its row waits for a
 * channel lock (a delivery only locks a waiting instance, a cancel waits for
 * no channel).
 */
import { sql, type SQL } from "drizzle-orm";
import { PgTransaction } from "drizzle-orm/pg-core";
import { ChannelModeConflictError } from "../core/errors.ts";
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

/** Run `fn` in the current transaction, or in a new one when `ex` is the database. */
export async function inTransaction<T>(ex: Executor, fn: (tx: Executor) => Promise<T>): Promise<T> {
  if (ex instanceof PgTransaction) return fn(ex);
  return ex.transaction((tx) => fn(tx));
}

/** The per-channel lock as an SQL expression (held until the surrounding transaction ends). */
function channelLock(channel: string): SQL {
  return sql`pg_advisory_xact_lock(hashtextextended(${`edda:channel:${channel}`}::text, 0))`;
}

/**
 * Take the per-channel lock in the current transaction. Exported for engine
 * code that must serialize with publishers in a transaction of its own. With
 * `instanceId`, that instance's row is locked first, in the same statement
 * (the aggregate consumes the locking CTE before the lock expression is
 * evaluated): the lock order of the module comment at no extra round trip.
 */
export async function lockChannel(tx: Executor, channel: string, instanceId?: string): Promise<void> {
  if (instanceId === undefined) {
    await tx.execute(sql`SELECT ${channelLock(channel)}`);
    return;
  }
  await tx.execute(sql`
    WITH i AS MATERIALIZED (SELECT 1 FROM workflow_instances WHERE instance_id = ${instanceId} FOR UPDATE)
    SELECT ${channelLock(channel)} FROM (SELECT count(*) FROM i) c`);
}

/** The subscription's match (if any) holds for message `m`: its document contains the match. */
export function matchesWait(m: string, s: string): SQL {
  const [msg, sub] = [sql.raw(m), sql.raw(s)];
  return sql`(${sub}.match IS NULL OR edda_message_doc(${msg}.data_type, ${msg}.data, ${msg}.metadata) @> ${sub}.match)`;
}

/** A broadcast message `m` this subscription may still receive: past the cursor, within the lookback, matching, not received. */
export function broadcastAvailable(m: string, s: string): SQL {
  const [msg, sub] = [sql.raw(m), sql.raw(s)];
  return sql`(${msg}.target_instance_id IS NULL AND ${msg}.id > coalesce(${sub}.cursor_message_id, 0)
      AND (${sub}.lookback_from IS NULL OR ${msg}.published_at > ${sub}.lookback_from)
      AND ${matchesWait(m, s)}
      AND NOT EXISTS (SELECT 1 FROM channel_message_receipts r WHERE r.instance_id = ${sub}.instance_id AND r.message_id = ${msg}.message_id))`;
}

/**
 * Whether message `m` is deliverable to subscription `s` (the rules in the
 * module comment). A point-to-point message is addressed to the instance and
 * ignores the wait's match.
 */
export function availableTo(m: string, s: string): SQL {
  const [msg, sub] = [sql.raw(m), sql.raw(s)];
  const targetedToMe = sql`(${msg}.target_instance_id = ${sub}.instance_id
      AND NOT EXISTS (SELECT 1 FROM channel_message_claims cl WHERE cl.message_id = ${msg}.message_id))`;
  return sql`(${msg}.channel = ${sub}.channel AND CASE ${sub}.mode
      WHEN 'direct' THEN ${targetedToMe}
      WHEN 'broadcast' THEN ${broadcastAvailable(m, s)} OR ${targetedToMe}
      ELSE (${msg}.target_instance_id IS NULL OR ${msg}.target_instance_id = ${sub}.instance_id)
           AND ${msg}.id > coalesce(${sub}.cursor_message_id, 0)
           AND ${matchesWait(m, s)}
           AND NOT EXISTS (SELECT 1 FROM channel_message_claims cl WHERE cl.message_id = ${msg}.message_id)
    END)`;
}

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
            INSERT INTO channel_message_receipts (instance_id, message_id)
            SELECT ${instanceId}, message_id FROM seq_msg WHERE target_instance_id IS NULL AND (SELECT match FROM sub) IS NOT NULL
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
