/**
 * The step's side of workflow emits: the `StreamEmitted` records a step is
 * about to write become stream items, appended under the step's lease before
 * anything that comes after them in the code is written or run — before the
 * tick's activities start (so an emit made before an activity reaches readers
 * before the activity's chunks), and before, or in the transaction of, the
 * conclusion. The append is deduplicated by operation id, so the crash of a
 * step after its emits were appended but before its conclusion committed
 * appends nothing new when the replay records them.
 */
import { LeaseLostError } from "../core/errors.ts";
import { EV } from "../core/model.ts";
import { fromPayload } from "../core/serialization.ts";
import { encodeStreamItem } from "../core/stream.ts";
import { EMIT_BUDGET } from "../storage/streams.ts";
import type { Fence, NewHistoryEvent, NewStreamItem, Storage } from "../storage/types.ts";

/** The stream item of an emit's history record. */
export function emittedItem(ev: NewHistoryEvent): NewStreamItem {
  const { value } = fromPayload(ev.data) as { value: { topic: string | null; data: unknown } };
  // The emit checked its item when it was made; encoded the same way again here.
  return { kind: "emit", source: ev.activityId, ...encodeStreamItem(value.data, value.topic === null ? {} : { topic: value.topic }, "the emitted value") };
}

const NOTHING_TO_APPEND: Promise<void> = Promise.resolve();

/** Append the emits among `records` not appended yet by this step (`done` tracks them). */
export function appendEmits(storage: Storage, fence: Fence, run: number, records: readonly NewHistoryEvent[] | undefined, done: Set<string>): Promise<void> {
  // Most steps emit nothing: no array, no async call for them.
  if (!records?.some((r) => r.eventType === EV.StreamEmitted && !done.has(r.activityId))) return NOTHING_TO_APPEND;
  return appendNew(storage, fence, run, records, done);
}

async function appendNew(storage: Storage, fence: Fence, run: number, records: readonly NewHistoryEvent[], done: Set<string>): Promise<void> {
  const items = records.filter((r) => r.eventType === EV.StreamEmitted && !done.has(r.activityId)).map(emittedItem);
  if (items.length === 0) return;
  const r = await storage.appendStream({ fence, run, attempt: 1, items, maxBytes: EMIT_BUDGET });
  if (!r.ok) throw new LeaseLostError(`lease on ${fence.instanceId} lost before its emits were appended`);
  for (const i of items) done.add(i.source);
}
