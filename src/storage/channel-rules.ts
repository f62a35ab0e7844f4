/**
 * The rules of channel delivery, stated once in SQL and used by every path
 * that delivers (channels.ts takes, channel-delivery.ts waits and batches,
 * inspect.ts counts), with the per-channel lock they rely on.
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
import type { Executor } from "./database.ts";

/** Run `fn` in the current transaction, or in a new one when `ex` is the database. */
export async function inTransaction<T>(ex: Executor, fn: (tx: Executor) => Promise<T>): Promise<T> {
  if (ex instanceof PgTransaction) return fn(ex);
  return ex.transaction((tx) => fn(tx));
}

/** The per-channel lock as an SQL expression (held until the surrounding transaction ends). */
export function channelLock(channel: string): SQL {
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
