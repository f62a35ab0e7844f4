/**
 * History → timeline: one entry per recorded event, in commit order, with
 * what a person needs to read it (kind, name, outcome, error, how long since
 * the previous entry). Pure: no I/O, tested without a database.
 *
 * History records when an outcome was committed, not when work began, so an
 * entry's duration is the time since the previous entry (or since the
 * instance started): for a step that is its activity's run time plus the
 * dispatch, for a timer the sleep, for a receive the wait.
 */
import { EV } from "../../core/model.ts";
import { fromPayload, historyDataView, type SerializedError } from "../../core/serialization.ts";
import type { HistoryEvent, Payload } from "../../core/model.ts";
import { formatSize, Oversized } from "./format.ts";

/** A history entry as the viewer loads it: `data` null when the payload was too large to load (`size` says how large). */
export type TimelineSource = Omit<HistoryEvent, "data"> & { data: Payload | null; size?: number };

export type EntryKind = "activity" | "attempt" | "retry" | "failed" | "timer" | "message" | "timeout" | "compensation" | "compensation-failed" | "other";

export interface TimelineEntry {
  kind: EntryKind;
  /** The history row (for the raw JSON link). */
  eventId: number;
  /** The recorded value was too large to show: its length. */
  oversized: number | null;
  activityId: string;
  /** Activity (or compensation) name, channel for messages. */
  name: string;
  at: Date;
  /** Milliseconds since the previous entry (or the start). */
  sinceMs: number;
  /** Short outcome line: "attempt 2 failed, retry in 2 s", "after 3 attempts". */
  note: string;
  error: SerializedError | null;
  /** The recorded value (result, message, error record) for the details view. */
  detail: unknown;
  /** True for failures and timeouts (rendered as problems). */
  bad: boolean;
}

interface Recorded {
  name?: unknown;
  result?: unknown;
  error?: SerializedError;
  attempt?: unknown;
  attempts?: unknown;
  retryInSeconds?: unknown;
  channel?: unknown;
  data?: unknown;
}

function asRecord(v: unknown): Recorded {
  return v && typeof v === "object" && !(v instanceof Uint8Array) ? (v as Recorded) : {};
}

/** `reserve_inventory:1` → `reserve_inventory`; `compensate:refund:1` → `refund`; `receive_jobs:2` → `jobs`. */
function nameFromId(activityId: string): string {
  const base = activityId.replace(/^compensate:/, "").replace(/#.*$/, "");
  return base.replace(/:\d+$/, "");
}

const BAD_EVENTS = new Set<string>([EV.ActivityAttemptFailed, EV.ActivityFailed, EV.MessageTimeout, EV.CompensationFailed]);

export function buildTimeline(history: TimelineSource[], startedAt: Date): TimelineEntry[] {
  let prev = startedAt.getTime();
  return history.map((ev) => {
    const at = ev.createdAt;
    const sinceMs = Math.max(0, at.getTime() - prev);
    prev = at.getTime();
    if (ev.data === null) {
      // Too large to load for a page: what the row says without its payload, and a link to it.
      const size = ev.size ?? 0;
      return { kind: "other", eventId: ev.id, oversized: size, activityId: ev.activityId, name: nameFromId(ev.activityId), at, sinceMs, note: `${ev.eventType}, ${formatSize(size)} recorded (too large to show here)`, error: null, detail: new Oversized(size), bad: BAD_EVENTS.has(ev.eventType) };
    }
    // Recorded errors as the API shows them: allow-listed fields, no stack.
    const value = historyDataView(fromPayload(ev.data));
    const r = asRecord(value);
    const name = typeof r.name === "string" ? r.name : nameFromId(ev.activityId);
    const base = { eventId: ev.id, oversized: null, activityId: ev.activityId, name, at, sinceMs, detail: value, error: null, bad: false };
    const attempts = typeof r.attempts === "number" && r.attempts > 1 ? `after ${r.attempts} attempts` : "";
    switch (ev.eventType) {
      case EV.ActivityCompleted:
        return { ...base, kind: "activity", note: attempts, detail: value instanceof Uint8Array ? value : r.result };
      case EV.ActivityAttemptFailed: {
        const retry = typeof r.retryInSeconds === "number" ? `, retry in ${r.retryInSeconds} s` : "";
        return { ...base, kind: "attempt", note: `attempt ${String(r.attempt ?? "?")} failed${retry}`, error: r.error ?? null, bad: true };
      }
      case EV.ActivityFailed:
        return { ...base, kind: "failed", note: attempts || "failed", error: r.error ?? null, bad: true };
      case EV.TimerExpired: {
        const retry = /#retry(\d+)$/.exec(ev.activityId);
        if (retry) return { ...base, kind: "retry", name: nameFromId(ev.activityId), note: `backoff before attempt ${Number(retry[1]) + 1} elapsed` };
        return { ...base, kind: "timer", name: ev.activityId.replace(/:\d+$/, ""), note: "timer fired" };
      }
      case EV.MessageReceived:
        return { ...base, kind: "message", name: typeof r.channel === "string" ? r.channel : nameFromId(ev.activityId).replace(/^receive_/, ""), note: "message received" };
      case EV.MessageTimeout:
        return { ...base, kind: "timeout", name: typeof r.channel === "string" ? r.channel : nameFromId(ev.activityId).replace(/^receive_/, ""), note: "timed out", bad: true };
      case EV.CompensationExecuted:
        return { ...base, kind: "compensation", note: "compensated", detail: r.result };
      case EV.CompensationFailed:
        return { ...base, kind: "compensation-failed", note: "compensation failed", error: r.error ?? null, bad: true };
      default:
        return { ...base, kind: "other", note: ev.eventType };
    }
  });
}

/** An error and its causes, outermost first (bounded: stored chains are at most a few deep). */
export function causeChain(err: SerializedError | null | undefined): SerializedError[] {
  const out: SerializedError[] = [];
  for (let e = err; e && out.length < 10; e = e.cause) out.push(e);
  return out;
}
