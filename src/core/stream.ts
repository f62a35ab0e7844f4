/**
 * Realtime streams, workflow side and the item encoding both sides share.
 *
 * `emit(ctx, data, { topic })` is an operation: recorded once in history
 * (`StreamEmitted`) and appended to the instance's stream by the step that
 * records it, deduplicated by its operation id — a replay neither records nor
 * appends it again. Activities stream through `ctx.stream` (ActivityStream,
 * engine/stream-writer.ts). What one item may hold is checked here, at the
 * call: an item over MAX_STREAM_ITEM_BYTES, or a value JSON cannot hold, is a
 * typed error where the code made it — deterministic, so a workflow can catch
 * it and every replay fails the same way.
 */
import type { WorkflowContext } from "./context.ts";
import { checkStoredName, StreamLimitError, UnserializableValueError } from "./errors.ts";
import { EV, type Payload } from "./model.ts";
import { operation, operationId } from "./operation.ts";

/** Largest encoded item (JSON text or bytes): one SSE event stays small enough for any proxy's buffer. */
export const MAX_STREAM_ITEM_BYTES = 64 * 1024;

export interface StreamOptions {
  /** Readers may filter by topic (`?topic=`); at most 255 characters. */
  topic?: string;
}

export interface EncodedItem {
  topic: string | null;
  data: Payload;
  size: number;
}

/** UTF-8 length of a string without encoding it (JSON text from `toJson` has no lone surrogates). */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // 2 bytes below U+0800, a surrogate pair 4 (2 per half), the rest of the BMP 3.
    if (c >= 0x80) n += c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 1 : 2;
  }
  return n;
}

/**
 * Stream items are for readers, not for replay: plain JSON (what
 * `JSON.stringify` gives — a Date as its ISO string), not the tagged form of
 * history. What JSON cannot hold (a BigInt, a cycle) is refused, typed.
 */
function plainJson(data: unknown, slot: string): string {
  try {
    return JSON.stringify(data) ?? "null";
  } catch (cause) {
    throw new UnserializableValueError(`${slot} cannot be stored as JSON: ${cause instanceof Error ? cause.message : String(cause)}`, slot, { cause });
  }
}

/** One stream item as stored, or a typed refusal. Bytes stay bytes; everything else is JSON. */
export function encodeStreamItem(data: unknown, opts: StreamOptions | undefined, slot: string): EncodedItem {
  const topic = opts?.topic ?? null;
  if (topic !== null) checkStoredName("topic", topic);
  let payload: Payload;
  let size: number;
  if (data instanceof Uint8Array) {
    payload = { type: "binary", bytes: data };
    size = data.byteLength;
  } else {
    const json = plainJson(data, slot);
    payload = { type: "json", json };
    size = utf8Length(json);
  }
  if (size > MAX_STREAM_ITEM_BYTES) {
    throw new StreamLimitError(`${slot} is ${size} bytes; a stream item holds at most ${MAX_STREAM_ITEM_BYTES}`, "chunk_too_large");
  }
  return { topic, data: payload, size };
}

/**
 * Publish `data` on the instance's stream from workflow code (progress,
 * "done"…). Recorded once; a replay returns at once without appending again.
 */
export function emit(ctx: WorkflowContext, data: unknown, opts: StreamOptions = {}): Promise<void> {
  const id = operationId(ctx, "emit");
  try {
    encodeStreamItem(data, opts, "the emitted value");
  } catch (err) {
    return Promise.reject(err as Error);
  }
  return operation<void>(ctx, {
    id,
    describe: "an emit",
    request: { kind: "value", eventType: EV.StreamEmitted, produce: () => ({ topic: opts.topic ?? null, data }) },
    decode: (ev) => (ev.eventType === EV.StreamEmitted ? { ok: true, value: undefined } : { mismatch: `holds a ${ev.eventType} record` }),
  });
}
