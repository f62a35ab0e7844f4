/**
 * Set-based delivery to waiting broadcast subscribers: one transaction per
 * batch instead of one per subscriber (a 1,000-subscriber fan-out was 1,000
 * transactions of six round trips each).
 *
 * The guarantees are the per-subscriber path's (`takeNextMessage` +
 * `lockWaitingSubscription` + `clearWaiting`, see channels.ts):
 *  - no lost wake-up: the channel lock is taken by its own statement first, so
 *    the statements after it (READ COMMITTED: a snapshot per statement) see
 *    every publish, take and wait that committed under the lock before us;
 *  - in order: each subscriber gets the oldest broadcast message past its
 *    cursor that it may receive (channels.ts `broadcastAvailable`: lookback,
 *    match, receipts), and the cursor advances to it — or, for a matched
 *    wait, a receipt records it;
 *  - a delivery and a timeout or cancel never both win: instance and
 *    subscription rows are locked FOR UPDATE, re-checked against their latest
 *    committed version (still waiting on the same activity id), and rows
 *    someone else holds are SKIPPED rather than waited for — this batch then
 *    never waits on a row lock while holding others, so it cannot deadlock
 *    with a cancel, a per-subscriber delivery or a receive step (instance →
 *    channel lock → subscription, see channels.ts) or the timeout sweep;
 *  - what it leaves: subscribers whose rows were locked, and those with an
 *    unclaimed point-to-point message (consumed through a claim, oldest
 *    first) go through the per-subscriber path, which waits for the locks.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { broadcastAvailable, inTransaction, lockChannel, MESSAGE_COLUMNS } from "./channels.ts";
import { DB_NOW, toChannelMessage, type Row } from "./rows.ts";
import type { ChannelMessageRecord, DeliveredWait, Payload } from "./types.ts";

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

export async function deliverBroadcast(
  ex: Executor,
  channel: string,
  limit: number,
  record: (msg: ChannelMessageRecord) => { eventType: string; data: Payload },
): Promise<DeliveredWait[]> {
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
        AND i.status = 'waiting_for_message'
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
    // wait, write a receipt — record the message, clear the waits, make the instances runnable.
    await tx.execute(sql`
      WITH d AS MATERIALIZED (
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
        SELECT d.instance_id, m.message_id FROM d JOIN channel_messages m ON m.id = d.seq WHERE d.matched
        ON CONFLICT DO NOTHING
      ), h AS (
        INSERT INTO workflow_history (instance_id, activity_id, event_type, data_type, event_data, event_data_binary)
        SELECT d.instance_id, d.activity_id, p.event_type, p.data_type, p.event_data, decode(p.event_data_hex, 'hex')
        FROM d JOIN p ON p.seq = d.seq ORDER BY d.ord
      )
      UPDATE workflow_instances SET status = 'running', updated_at = ${DB_NOW}
      WHERE instance_id IN (SELECT instance_id FROM d) AND status = 'waiting_for_message'`);
    return picked.map((p) => ({ instanceId: p.instance_id, activityId: p.activity_id, seq: Number(p.seq) }));
  });
}
