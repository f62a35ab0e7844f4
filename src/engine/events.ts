/**
 * Sending CloudEvents. `sendEvent` POSTs one in structured mode right away (an
 * external call: use it from a non-transactional activity). Inside a
 * transactional activity, `sendEventTransactional` writes an outbox row in the
 * step's transaction instead — the event exists if and only if the step
 * commits — and the relay delivers it after the commit (and the sweeper
 * retries it until it is published, invalid or expired).
 */
import { ACTIVITY_INTERNALS, type ActivityContext } from "../core/context.ts";
import { toJson, toPayload } from "../core/serialization.ts";
import type { ActivityInternals } from "./execute.ts";
import { postEvent, structuredMessage } from "./outbox.ts";

export interface OutgoingEvent {
  type: string;
  source: string;
  data?: unknown;
  /** Default: a random UUID (transactional: derived from the activity, so a retried step reuses it). */
  id?: string;
  subject?: string;
  datacontenttype?: string;
  /** Extension attributes (lower-case alphanumeric names). */
  extensions?: Record<string, string | number | boolean>;
}

const EXT_NAME = /^[a-z0-9]{1,20}$/;

function check(e: OutgoingEvent) {
  if (!e.type || !e.source) throw new TypeError("a CloudEvent needs a type and a source");
  for (const k of Object.keys(e.extensions ?? {})) if (!EXT_NAME.test(k)) throw new TypeError(`invalid CloudEvent extension name "${k}"`);
}

/** POST an event to a broker now, structured mode. Throws when the broker does not accept it. */
export async function sendEvent(event: OutgoingEvent, opts: { brokerUrl: string; fetch?: typeof fetch; timeoutMs?: number }): Promise<string> {
  check(event);
  const id = event.id ?? crypto.randomUUID();
  const binary = event.data instanceof Uint8Array;
  const message = structuredMessage({
    id,
    type: event.type,
    source: event.source,
    time: new Date().toISOString(),
    datacontenttype: event.datacontenttype ?? (binary ? "application/octet-stream" : "application/json"),
    data: event.data ?? null,
    extensions: { ...event.extensions, ...(event.subject ? { subject: event.subject } : {}) },
  });
  const outcome = await postEvent(opts.brokerUrl, message, opts);
  if (!outcome.ok) throw new Error(`event ${id} not accepted: ${outcome.error}`);
  return id;
}

/** Write the event to the outbox in the activity's transaction; relayed after commit. */
export async function sendEventTransactional(ctx: ActivityContext, event: OutgoingEvent): Promise<string> {
  check(event);
  const rt = ctx[ACTIVITY_INTERNALS] as ActivityInternals;
  const seq = (outboxCounters.get(ctx) ?? 0) + 1;
  outboxCounters.set(ctx, seq);
  const id = event.id ?? `${ctx.idempotencyKey}:${seq}`;
  await rt.storage.addOutboxEvent({
    eventId: id,
    eventType: event.type,
    eventSource: event.source,
    data: toPayload(event.data ?? null),
    contentType: event.data instanceof Uint8Array ? (event.datacontenttype ?? "application/octet-stream") : (event.datacontenttype ?? "application/json"),
    extensions: event.extensions || event.subject ? toJson({ ...event.extensions, ...(event.subject ? { subject: event.subject } : {}) }) : null,
  });
  rt.afterCommit(() => rt.notify.outbox([id]));
  return id;
}

const outboxCounters = new WeakMap<ActivityContext, number>();
