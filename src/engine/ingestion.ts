/**
 * CloudEvents into the engine: every prepared event of a request in ONE
 * transaction — per event the `(source, id)` dedupe record (a duplicate is
 * accepted and ignored), the message on the channel named by its type and the
 * start of an event-handler workflow. http/cloudevents.ts validates and
 * prepares; this module stores.
 */
import type { CloudEventRecord } from "../core/cloudevent.ts";
import type { Workflow } from "../core/definitions.ts";
import { toJson, toPayload } from "../core/serialization.ts";
import type { TxStorage } from "../storage/types.ts";
import type { Uses } from "./deps.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Created, ParentLink, StartOptions } from "./starts.ts";

/** One validated event, ready to store. */
export interface PreparedEvent {
  event: CloudEventRecord;
  id: string;
  source: string;
  type: string;
  metadata: Record<string, unknown>;
  target: string | null;
  handler: Workflow | undefined;
  input: unknown;
}

export interface IngestResult {
  id: string;
  duplicate: boolean;
  messageId?: string;
  instanceId?: string;
}

/** What ingestion needs of the engine besides storage: creating instances in the transaction, and the wake-ups after commit. */
export interface IngestParts extends Uses<"storage"> {
  ensureDefinitions(workflows: Iterable<Workflow>): Promise<void>;
  createValidated(storage: TxStorage, wf: Workflow, value: unknown, opts: StartOptions, link?: ParentLink): Promise<Created>;
  notifyPublished(channel: string, scope?: DispatchScope): void;
  afterStart(wf: Workflow, instanceId: string, input: unknown, scope?: DispatchScope, traceparent?: string | null): void;
}

/** Postgres aborted the transaction to break a deadlock or a serialization conflict: safe to run again. */
function isTransient(err: unknown): boolean {
  for (let e: unknown = err, i = 0; i < 5 && typeof e === "object" && e !== null; i++, e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (code === "40P01" || code === "40001") return true;
  }
  return false;
}

/**
 * All events in one transaction. Locks are taken in one global order — dedupe
 * keys sorted by (source, id), then channels sorted by type (stable, so a
 * channel's messages keep the request's order) — so concurrent batches
 * cannot deadlock each other.
 */
export async function ingest(engine: IngestParts, prepared: PreparedEvent[], scope: DispatchScope | undefined): Promise<IngestResult[]> {
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const byKey = [...prepared].sort((a, b) => cmp(a.source, b.source) || cmp(a.id, b.id));
  const byChannel = [...prepared].sort((a, b) => cmp(a.type, b.type));
  await engine.ensureDefinitions(prepared.flatMap((p) => (p.handler ? [p.handler] : [])));
  const run = (tx: TxStorage) => ingestIn(tx, engine, byKey, byChannel, scope);
  for (let attempt = 1; ; attempt++) {
    try {
      const results = await engine.storage.transaction(run);
      return prepared.map((p) => results.get(p)!);
    } catch (err) {
      if (attempt >= 3 || !isTransient(err)) throw err;
    }
  }
}

async function ingestIn(tx: TxStorage, engine: IngestParts, byKey: PreparedEvent[], byChannel: PreparedEvent[], scope: DispatchScope | undefined) {
  const results = new Map<PreparedEvent, IngestResult>();
  // The message id is chosen here so the dedupe record names it in the same statement (received-events view).
  const messageIds = new Map<PreparedEvent, string>();
  for (const p of byKey) {
    const messageId = crypto.randomUUID();
    const time = p.event.attributes.time;
    if (!(await tx.recordCloudEvent(p.source, p.id, { type: p.type, time: typeof time === "string" ? time.slice(0, 64) : null, messageId }))) results.set(p, { id: p.id, duplicate: true });
    else messageIds.set(p, messageId);
  }
  const started: { p: PreparedEvent; instanceId: string }[] = [];
  for (const p of byChannel) {
    if (results.has(p)) continue;
    const msg = await tx.publishMessage({ channel: p.type, messageId: messageIds.get(p)!, data: toPayload(p.event.data ?? null), metadata: toJson(p.metadata), targetInstanceId: p.target });
    const result: IngestResult = { id: p.id, duplicate: false, messageId: msg.messageId };
    if (p.handler) {
      // The distributed-tracing extension: the run's trace continues the sender's.
      const traceparent = p.event.attributes.traceparent;
      const s = await engine.createValidated(tx, p.handler, p.input, typeof traceparent === "string" ? { traceparent } : {});
      result.instanceId = s.instanceId;
      await tx.noteCloudEventStart(p.source, p.id, s.instanceId);
      if (s.created) started.push({ p, instanceId: s.instanceId });
    }
    results.set(p, result);
  }
  tx.afterCommit(() => {
    for (const type of new Set(byChannel.filter((p) => !results.get(p)!.duplicate).map((p) => p.type))) engine.notifyPublished(type, scope);
    for (const { p, instanceId } of started) engine.afterStart(p.handler!, instanceId, p.input, scope);
  });
  return results;
}
