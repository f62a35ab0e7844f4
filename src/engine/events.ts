/**
 * Sending CloudEvents. `sendEvent` POSTs one in structured mode right away (an
 * external call: use it from a non-transactional activity). Inside a
 * transactional activity, `sendEventTransactional` writes an outbox row in the
 * step's transaction instead — the event exists if and only if the step
 * commits — and the relay delivers it after the commit (and the sweeper
 * retries it until it is published, invalid or expired).
 */
import type { ActivityContext } from "../core/context.ts";
import { outgoingEvent, SPEC_VERSION, type CloudEventRecord } from "../core/cloudevent.ts";
import { checkStoredName, InvalidCloudEventError } from "../core/errors.ts";
import { toJson, toStoredPayload } from "../core/serialization.ts";
import { activityInternalsOf } from "./execute.ts";
import { postEvent, structuredMessage } from "./outbox.ts";

export interface OutgoingEvent {
  type: string;
  /** A URI-reference (RFC 3986), e.g. `/orders` or `https://example.com/orders`. */
  source: string;
  data?: unknown;
  /** Default: a random UUID (transactional: derived from the activity, so a retried step reuses it). */
  id?: string;
  subject?: string;
  /** An RFC 2046 media type; default application/json (application/octet-stream for bytes). */
  datacontenttype?: string;
  /** An absolute URI. */
  dataschema?: string;
  /** Extension attributes: lower-case alphanumeric names (≤ 20), String, Integer (32-bit) or Boolean values. */
  extensions?: Record<string, string | number | boolean>;
}

const CORE_NAMES = new Set(["id", "source", "specversion", "type", "datacontenttype", "dataschema", "subject", "time", "data"]);

/**
 * The event as it will be sent, validated by the rules ingestion applies
 * (and the outbox's column sizes): an InvalidCloudEventError at the call.
 */
function build(event: OutgoingEvent, id: string, time: string): CloudEventRecord {
  for (const name of Object.keys(event.extensions ?? {})) {
    if (CORE_NAMES.has(name)) throw new InvalidCloudEventError(`extension "${name}" would replace a core attribute: set it as a field of the event`, { attribute: name });
  }
  const binary = event.data instanceof Uint8Array;
  return outgoingEvent(
    {
      ...event.extensions,
      specversion: SPEC_VERSION,
      id,
      source: event.source,
      type: event.type,
      time,
      datacontenttype: event.datacontenttype ?? (binary ? "application/octet-stream" : "application/json"),
      dataschema: event.dataschema,
      subject: event.subject,
    },
    event.data ?? null,
  );
}

/** POST an event to a broker now, structured mode. Throws when the broker does not accept it. */
export async function sendEvent(event: OutgoingEvent, opts: { brokerUrl: string; fetch?: typeof fetch; timeoutMs?: number }): Promise<string> {
  const id = event.id ?? crypto.randomUUID();
  const message = structuredMessage(build(event, id, new Date().toISOString()));
  const outcome = await postEvent(opts.brokerUrl, message, opts);
  if (!outcome.ok) throw new Error(`event ${id} not accepted: ${outcome.error}`);
  return id;
}

/** Write the event to the outbox in the activity's transaction; relayed after commit. */
export async function sendEventTransactional(ctx: ActivityContext, event: OutgoingEvent): Promise<string> {
  const rt = activityInternalsOf(ctx);
  checkStoredName("event type", event.type);
  if (event.id !== undefined) checkStoredName("event id", event.id);
  const seq = (outboxCounters.get(ctx) ?? 0) + 1;
  const id = event.id ?? `${ctx.idempotencyKey}:${seq}`;
  // The distributed-tracing extension: the consumer's work joins this run's trace (unless the caller set one).
  const traceparent = event.extensions?.traceparent === undefined ? rt.notify.traceparent?.(ctx.activityId, ctx.attempt) : null;
  const traced = traceparent ? { ...event, extensions: { ...event.extensions, traceparent } } : event;
  const { attributes } = build(traced, id, new Date().toISOString());
  outboxCounters.set(ctx, seq);
  const { specversion: _v, id: _i, source, type, time: _t, datacontenttype, ...extensions } = attributes;
  await rt.storage.addOutboxEvent({
    eventId: id,
    eventType: type,
    eventSource: source,
    data: toStoredPayload(event.data ?? null, `the data of event "${type}"`),
    contentType: String(datacontenttype),
    extensions: Object.keys(extensions).length ? toJson(extensions) : null,
  });
  rt.afterCommit(() => rt.notify.outbox([id]));
  return id;
}

const outboxCounters = new WeakMap<ActivityContext, number>();
