/**
 * Message waits in workflow code: `receive`, `waitMessage`, `waitEvent`.
 * Each has a deterministic id (`receive_{channel}:n`); a recorded
 * `MessageReceived` returns the message, a recorded `MessageTimeout` throws a
 * catchable timeout error (`EventTimeoutError` for events), anything else
 * suspends the workflow until a message is delivered or the wait times out.
 */
import type { z } from "zod";
import type { WorkflowContext } from "./context.ts";
import { checkStoredName, EventTimeoutError, MessageTimeoutError, ValidationError } from "./errors.ts";
import { encodeIdPart } from "./ids.ts";
import { normalizeMatch, type EventMatch, type MatchDocument } from "./match.ts";
import { EV, type ChannelMode, type HistoryEvent } from "./model.ts";
import { operation, operationId, replayStateOf } from "./operation.ts";
import type { Decoded } from "./replay.ts";
import { fromPayload, type SerializedError } from "./serialization.ts";

export interface ChannelMessage<T = unknown> {
  id: string;
  channel: string;
  data: T;
  metadata: Record<string, unknown> | null;
  publishedAt: string;
}

export interface ReceivedEvent<T = unknown> {
  data: T;
  type: string;
  source: string;
  id: string;
  time: string | null;
  datacontenttype: string | null;
  subject: string | null;
  extensions: Record<string, unknown>;
}

export interface ReceiveOptions {
  /** Give up after this long: the wait throws MessageTimeoutError. */
  timeoutSeconds?: number;
  /** Explicit activity id instead of `receive_{channel}:n`. */
  id?: string;
}

/** The recorded form of a delivered message (history payload). */
export interface RecordedMessage {
  messageId: string;
  channel: string;
  data: unknown;
  metadata: Record<string, unknown> | null;
  publishedAt: string;
}

export function checkChannel(channel: string) {
  checkStoredName("channel", channel);
}

function checkTimeout(t: number | undefined) {
  if (t !== undefined && !(Number.isFinite(t) && t > 0)) throw new TypeError(`timeoutSeconds must be a positive number, got ${t}`);
}

/** How a message wait's record settles it: the message, a timeout error, or the wait's failure (no subscription…). */
export function decodeMessageRecord(ctx: WorkflowContext, ev: HistoryEvent, channel: string, event: boolean, timeoutSeconds?: number): Decoded {
  if (ev.eventType === EV.MessageReceived) return { ok: true, value: fromPayload(ev.data) as RecordedMessage };
  if (ev.eventType === EV.MessageTimeout) {
    const Err = event ? EventTimeoutError : MessageTimeoutError;
    return { ok: false, error: new Err(`no ${event ? "event" : "message"} on "${channel}" within ${timeoutSeconds ?? "the timeout"} s`) };
  }
  if (ev.eventType === EV.ActivityFailed) {
    return { ok: false, error: replayStateOf(ctx).restoreError((fromPayload(ev.data) as { error: SerializedError }).error) };
  }
  return { mismatch: `holds a ${ev.eventType} record` };
}

/** `receive_{channel}` with the channel escaped (ids.ts): `orders#eu` → `receive_orders%23eu:1`. */
export const receiveIdPrefix = (channel: string): string => `receive_${encodeIdPart(channel)}`;

function waitOn(ctx: WorkflowContext, channel: string, opts: ReceiveOptions, subscribeAs: ChannelMode | null, event: boolean, match?: MatchDocument): Promise<RecordedMessage> {
  checkChannel(channel);
  checkTimeout(opts.timeoutSeconds);
  const id = operationId(ctx, receiveIdPrefix(channel), opts.id);
  return operation<RecordedMessage>(ctx, {
    id,
    describe: `a receive on "${channel}"`,
    request: {
      kind: "wait",
      wait: {
        kind: "message",
        activityId: id,
        channel,
        ...(opts.timeoutSeconds !== undefined ? { timeoutSeconds: opts.timeoutSeconds } : {}),
        ...(subscribeAs ? { subscribeAs } : {}),
        event,
        ...(match ? { match } : {}),
      },
    },
    decode: (ev) => decodeMessageRecord(ctx, ev, channel, event, opts.timeoutSeconds),
  });
}

export function toChannelMessage<T>(m: RecordedMessage): ChannelMessage<T> {
  return { id: m.messageId, channel: m.channel, data: m.data as T, metadata: m.metadata, publishedAt: m.publishedAt };
}

/**
 * Receive the next message on a channel this instance subscribed to. Returns
 * at once when one is queued; otherwise the workflow waits without holding a
 * worker.
 */
export async function receive<T = unknown>(ctx: WorkflowContext, channel: string, opts: ReceiveOptions = {}): Promise<ChannelMessage<T>> {
  return toChannelMessage<T>(await waitOn(ctx, channel, opts, null, false));
}

/**
 * Wait for a message sent to this instance on `channel` (`sendTo`,
 * `publishToGroup`, `POST /instances/:id/messages`). Messages sent before the
 * wait are not lost. Subscribes in `direct` mode unless already subscribed.
 */
export async function waitMessage<T = unknown>(ctx: WorkflowContext, channel: string, opts: ReceiveOptions = {}): Promise<ChannelMessage<T>> {
  return toChannelMessage<T>(await waitOn(ctx, channel, opts, "direct", false));
}

export interface WaitEventOptions<S extends z.ZodType | undefined> extends ReceiveOptions {
  /** Parse `data` with this schema; a mismatch throws ValidationError in the workflow. */
  schema?: S;
  /**
   * Accept only events with these attribute values or data fields, e.g.
   * `{ subject: orderId }` or `{ "data.orderId": orderId }` (core/match.ts).
   * Events targeted at this instance (`eddainstanceid`) are addressed to it
   * and delivered whatever they hold.
   */
  match?: EventMatch;
}

/**
 * Wait for a CloudEvent of `type` (delivered through the channel named by the
 * type). Lookback: events published after the instance started count, even
 * when they arrived before the wait (bounded by the channel message
 * retention); each event is received once per instance, and one event
 * satisfies every instance whose wait it matches. Timeout → EventTimeoutError.
 */
export async function waitEvent<S extends z.ZodType | undefined = undefined>(
  ctx: WorkflowContext,
  type: string,
  opts: WaitEventOptions<S> = {},
): Promise<ReceivedEvent<S extends z.ZodType ? z.output<S> : unknown>> {
  const match = normalizeMatch(opts.match);
  return toReceivedEvent(await waitOn(ctx, type, opts, "broadcast", true, match), type, opts.schema) as ReceivedEvent<S extends z.ZodType ? z.output<S> : unknown>;
}

/** A recorded message as the CloudEvent it carried (`ce_*` metadata), `data` checked against `schema` when given. */
export function toReceivedEvent(m: RecordedMessage, type: string, schema?: z.ZodType): ReceivedEvent {
  const meta = m.metadata ?? {};
  const extensions: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(meta)) {
    if (k.startsWith("ce_") && !["ce_type", "ce_source", "ce_id", "ce_time", "ce_datacontenttype", "ce_subject", "ce_specversion"].includes(k)) {
      extensions[k.slice(3)] = v;
    }
  }
  let data = m.data;
  if (schema) {
    const parsed = schema.safeParse(data);
    if (!parsed.success) throw new ValidationError(`event "${type}" data does not match the schema`, parsed.error.issues);
    data = parsed.data;
  }
  const str = (v: unknown) => (typeof v === "string" ? v : null);
  return {
    data,
    type: str(meta.ce_type) ?? type,
    source: str(meta.ce_source) ?? "",
    id: str(meta.ce_id) ?? m.messageId,
    time: str(meta.ce_time),
    datacontenttype: str(meta.ce_datacontenttype),
    subject: str(meta.ce_subject),
    extensions,
  };
}
