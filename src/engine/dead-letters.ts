/**
 * The outbox's dead letters for operators: rows the relay set aside as
 * `invalid` (the broker refused the event, or it is not a valid CloudEvent) or
 * `expired` (out of attempts or past its age). They stay until someone acts:
 *
 *   redeliver: the row is re-armed (pending, attempts reset, age counted from
 *              now) and relayed at once like a freshly committed event; if the
 *              broker fails again it goes through the same retries and can end
 *              a dead letter again;
 *   discard:   the row is deleted.
 *
 * Both are guarded by the status in one statement (storage/outbox.ts): an
 * unknown id is a NotFoundError, a row that is not (or no longer) a dead letter
 * a ConflictError, and in both cases nothing changes.
 */
import { ConflictError, NotFoundError } from "../core/errors.ts";
import { fromJson, toBase64 } from "../core/serialization.ts";
import type { DeadLetterAction, DeadLetterQuery, DeadLetterStatus, OutboxRecord } from "../storage/types.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { notifyOutbox } from "./outbox.ts";

export interface DeadLetterView {
  eventId: string;
  type: string;
  source: string;
  status: DeadLetterStatus;
  /** Failed delivery attempts since it was written (or last re-armed). */
  attempts: number;
  /** Why it was set aside: the broker's answer or the validation message. */
  lastError: string | null;
  createdAt: string;
  rearmedAt: string | null;
  contentType: string;
  /** With payloads: the event data (JSON data decoded; binary data in `dataBase64`). */
  data?: unknown;
  dataBase64?: string;
  /** With payloads: the extra CloudEvents attributes, or null. */
  extensions?: unknown;
}

/** Stored text decoded leniently: a dead letter is shown whatever it holds. */
function decoded(text: string | null): unknown {
  if (text === null) return null;
  try {
    return fromJson(text);
  } catch {
    return text;
  }
}

export function deadLetterView(row: OutboxRecord, opts: { payloads?: boolean } = {}): DeadLetterView {
  const view: DeadLetterView = {
    eventId: row.eventId,
    type: row.eventType,
    source: row.eventSource,
    status: row.status as DeadLetterStatus,
    attempts: row.retryCount,
    lastError: row.lastError,
    createdAt: row.createdAt.toISOString(),
    rearmedAt: row.rearmedAt?.toISOString() ?? null,
    contentType: row.contentType,
  };
  if (!opts.payloads) return view;
  if (row.data.type === "binary") view.dataBase64 = toBase64(row.data.bytes);
  else view.data = decoded(row.data.json);
  view.extensions = decoded(row.extensions);
  return view;
}

export async function listDeadLetters(deps: Uses<"storage">, query: DeadLetterQuery, opts: { payloads?: boolean } = {}): Promise<{ events: DeadLetterView[]; nextCursor: string | null }> {
  const page = await deps.storage.listDeadLetters(query);
  return { events: page.events.map((row) => deadLetterView(row, opts)), nextCursor: page.nextCursor };
}

function check(eventId: string, r: DeadLetterAction): void {
  if (r.done) return;
  if (r.previousStatus === null) throw new NotFoundError(`outbox event "${eventId}" not found`);
  const dead = r.previousStatus === "invalid" || r.previousStatus === "expired";
  throw new ConflictError(dead ? `outbox event "${eventId}" is no longer a dead letter (another request acted on it)` : `outbox event "${eventId}" is ${r.previousStatus}, not a dead letter`);
}

/** Re-arm a dead letter and relay it now (with a broker configured; otherwise the next relay takes it). */
export async function redeliverDeadLetter(deps: Uses<"outbox" | "storage">, eventId: string, scope?: DispatchScope): Promise<{ status: "pending" }> {
  check(eventId, await deps.storage.rearmOutboxEvent(eventId));
  notifyOutbox(deps, [eventId], scope);
  return { status: "pending" };
}

export async function discardDeadLetter(deps: Uses<"storage">, eventId: string): Promise<{ discarded: true }> {
  check(eventId, await deps.storage.discardOutboxEvent(eventId));
  return { discarded: true };
}
