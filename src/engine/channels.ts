/**
 * Channel waits and deliveries, engine side.
 *
 * No lost wake-ups: a receive that finds nothing marks its subscription as
 * waiting in the same transaction that took the per-channel lock (inside
 * `takeNextMessage`), and a publish takes the same lock. So either the
 * receive's take sees the message, or the publish commits after the wait is
 * visible and its post-commit wake-up delivers it. The sweeper runs the same
 * delivery for any waiter that still has a message available (a wake-up lost
 * to a crash between commit and callback).
 */
import { ChannelModeConflictError, EddaError } from "../core/errors.ts";
import { EV } from "../core/model.ts";
import type { WaitRequest } from "../core/replay.ts";
import { fromJson, serializeError, toPayload } from "../core/serialization.ts";
import type { RecordedMessage } from "../core/waits.ts";
import type { ChannelMessageRecord, NewHistoryEvent, Payload, Storage, TxStorage } from "../storage/types.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { countFailure, isTransientFailure, type Isolation } from "./poison.ts";

type MessageWait = Extract<WaitRequest, { kind: "message" }>;

/** The payload recording a delivered message (the same for every subscriber it reaches). */
function messageReceived(msg: ChannelMessageRecord): { eventType: string; data: Payload } {
  const recorded: RecordedMessage = {
    messageId: msg.messageId,
    channel: msg.channel,
    data: msg.data.type === "binary" ? msg.data.bytes : fromJson(msg.data.json),
    metadata: msg.metadata === null ? null : (fromJson(msg.metadata) as Record<string, unknown>),
    publishedAt: msg.publishedAt.toISOString(),
  };
  return { eventType: EV.MessageReceived, data: toPayload(recorded) };
}

/** The history row recording a delivered message. */
export function messageReceivedEvent(activityId: string, msg: ChannelMessageRecord): NewHistoryEvent {
  return { activityId, ...messageReceived(msg) };
}

export type MessageWaitResult =
  | { kind: "received"; event: NewHistoryEvent }
  | { kind: "failed"; event: NewHistoryEvent }
  | { kind: "waiting"; timeoutSeconds: number | null };

/**
 * Inside the step's transaction: subscribe when the wait asks for it, take a
 * queued message or mark the subscription as waiting.
 */
export async function prepareMessageWait(tx: TxStorage, instanceId: string, w: MessageWait, now = Date.now()): Promise<MessageWaitResult> {
  const sub = await tx.getSubscription(instanceId, w.channel);
  if (!sub) {
    if (!w.subscribeAs) {
      return failed(w, new EddaError(`receive on channel "${w.channel}" without a subscription: call subscribe(ctx, "${w.channel}", mode) first`));
    }
    try {
      await tx.subscribe(instanceId, w.channel, w.subscribeAs, { lookback: w.event === true });
    } catch (err) {
      if (err instanceof ChannelModeConflictError) return failed(w, err);
      throw err;
    }
  }
  const msg = await tx.takeNextMessage(instanceId, w.channel, w.match ?? null);
  if (msg) return { kind: "received", event: messageReceivedEvent(w.activityId, msg) };
  // Seconds from the database's clock, like leases and timers (or an absolute time: a race's timerUntil).
  await tx.setWaiting(instanceId, w.channel, w.activityId, w.timeoutAt ?? w.timeoutSeconds ?? null, w.match ?? null);
  const timeoutSeconds = w.timeoutAt ? Math.max(0, (w.timeoutAt.getTime() - now) / 1000) : (w.timeoutSeconds ?? null);
  return { kind: "waiting", timeoutSeconds };
}

function failed(w: MessageWait, err: Error): MessageWaitResult {
  return { kind: "failed", event: { activityId: w.activityId, eventType: EV.ActivityFailed, data: toPayload({ name: "receive", error: serializeError(err) }) } };
}

/**
 * Deliver to one waiting subscriber, in one transaction: lock the waiting
 * subscription (still waiting on `activityId`, else someone else — the
 * timeout sweep, another delivery — got there first), take the message,
 * record it, clear the wait (the instance becomes runnable).
 */
async function deliverTo(storage: Storage, instanceId: string, channel: string, activityId: string): Promise<boolean> {
  return storage.transaction(async (tx) => {
    if (!(await tx.lockWaitingSubscription(instanceId, channel, activityId))) return false;
    const msg = await tx.takeNextMessage(instanceId, channel);
    if (!msg) return false;
    await tx.appendHistory(instanceId, [messageReceivedEvent(activityId, msg)]);
    await tx.clearWaiting(instanceId, channel);
    return true;
  });
}

/** Broadcast subscribers served per transaction by the set-based delivery. */
const BROADCAST_BATCH = 200;

/**
 * Set-based delivery to the broadcast subscribers of `channel`, a batch per
 * transaction until a batch comes back short (bounded, like `wakeChannel`).
 * Returns who got a message; each is dispatched once its batch committed.
 */
async function deliverBroadcastBatches(deps: Uses<"dispatcher" | "storage">, channel: string, scope?: DispatchScope): Promise<string[]> {
  const delivered: string[] = [];
  for (let round = 0; round < 50; round++) {
    const batch = await deps.storage.deliverBroadcast(channel, BROADCAST_BATCH, messageReceived);
    for (const d of batch) {
      delivered.push(d.instanceId);
      deps.dispatcher.dispatch({ instanceId: d.instanceId }, scope);
    }
    if (batch.length < BROADCAST_BATCH) break;
  }
  return delivered;
}

/**
 * Deliver queued messages to waiting subscribers (optionally of one channel)
 * and dispatch them. Broadcast channels go set-based first; whoever that
 * leaves (competing and direct subscribers, a broadcast subscriber with a
 * point-to-point message or rows locked by a racing cancel or timeout) gets
 * the per-subscriber path, which claims exactly once and waits for locks.
 *
 * Poison isolation: a broadcast batch that fails leaves its subscribers to
 * the per-subscriber path, where each delivery fails alone; a failure that is
 * not transient is counted on the subscriber's instance (quarantined at the
 * limit) and the others are still served. With `iso` the failures are
 * reported to the sweep; without it (a post-publish wake-up) they are
 * counted the same way.
 */
export async function deliverToWaitingSubscribers(deps: Uses<"dispatcher" | "quarantineAfter" | "storage">, limit: number, scope?: DispatchScope, channel?: string, iso?: Isolation): Promise<number> {
  const isolation: Isolation = iso ?? { storage: deps.storage, maxFailures: deps.quarantineAfter, failures: [], failedIds: new Set() };
  const waiting = await deps.storage.findWaitingSubscribersWithMessages(limit, channel);
  const done = new Set<string>();
  const key = (instanceId: string, ch: string) => `${ch}\u0000${instanceId}`;
  for (const ch of new Set(waiting.filter((w) => w.mode === "broadcast").map((w) => w.channel))) {
    try {
      for (const id of await deliverBroadcastBatches(deps, ch, scope)) done.add(key(id, ch));
    } catch (err) {
      if (isTransientFailure(err)) throw err;
      // Left to the per-subscriber path below, where a poison delivery fails alone.
    }
  }
  let delivered = done.size;
  for (const w of waiting) {
    if (done.has(key(w.instanceId, w.channel)) || isolation.failedIds.has(w.instanceId)) continue;
    try {
      if (await deliverTo(deps.storage, w.instanceId, w.channel, w.activityId)) {
        delivered++;
        deps.dispatcher.dispatch({ instanceId: w.instanceId }, scope);
      }
    } catch (err) {
      await countFailure(isolation, "channel_delivery", w.instanceId, err);
    }
  }
  return delivered;
}

/** Post-commit wake-up after a publish: deliver until no waiter on the channel has a message. */
export async function wakeChannel(deps: Uses<"dispatcher" | "quarantineAfter" | "storage">, channel: string, scope?: DispatchScope): Promise<void> {
  for (let round = 0; round < 50; round++) {
    const n = await deliverToWaitingSubscribers(deps, 200, scope, channel);
    if (n < 200) return;
  }
}

/** Post-commit: a message was published on `channel`; deliver it to waiting subscribers (the sweeper catches a failure). */
export function notifyPublished(deps: Uses<"dispatcher" | "quarantineAfter" | "storage">, channel: string, scope?: DispatchScope): void {
  const p = wakeChannel(deps, channel, scope).catch((err: unknown) => console.error(`edda: wake-up on "${channel}" failed (the sweeper will deliver)`, err));
  scope?.waitUntil?.(p);
}
