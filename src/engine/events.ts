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

/** The structured-mode JSON body of an event. */
export function structuredBody(e: OutgoingEvent & { id: string; time?: string }): string {
  const body: Record<string, unknown> = {
    specversion: "1.0",
    id: e.id,
    type: e.type,
    source: e.source,
    time: e.time ?? new Date().toISOString(),
    ...(e.subject ? { subject: e.subject } : {}),
    ...e.extensions,
  };
  if (e.data instanceof Uint8Array) {
    let s = "";
    for (const b of e.data) s += String.fromCharCode(b);
    body.data_base64 = btoa(s);
    body.datacontenttype = e.datacontenttype ?? "application/octet-stream";
  } else if (e.data !== undefined) {
    body.data = e.data;
    body.datacontenttype = e.datacontenttype ?? "application/json";
  }
  return JSON.stringify(body);
}

/** POST an event to a broker now. Throws on a non-2xx answer. */
export async function sendEvent(event: OutgoingEvent, opts: { brokerUrl: string; fetch?: typeof fetch }): Promise<string> {
  check(event);
  const id = event.id ?? crypto.randomUUID();
  const res = await (opts.fetch ?? fetch)(opts.brokerUrl, {
    method: "POST",
    headers: { "content-type": "application/cloudevents+json; charset=utf-8" },
    body: structuredBody({ ...event, id }),
  });
  await res.arrayBuffer().catch(() => undefined);
  if (!res.ok) throw new Error(`broker answered HTTP ${res.status} for event ${id}`);
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
