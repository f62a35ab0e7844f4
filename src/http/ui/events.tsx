/** @jsxImportSource hono/jsx */
/**
 * Received CloudEvents (engine.receivedEvents): id, source, type, time, when
 * it arrived, and which instances it woke — the one an event-handler workflow
 * started for it and whoever took its channel message. Newest first, paged.
 * Kept as long as the dedupe retention keeps the record (7 days by default);
 * who took the message, as long as the channel retention keeps the message.
 */
import type { ReceivedEvent } from "../../engine/records.ts";
import { clip, formatTime } from "./format.ts";
import { Table, type Column } from "./table.tsx";

export const EVENTS_PAGE = 50;

export interface EventsPageProps {
  events: ReceivedEvent[];
  /** The link to the next (older) page, or null. */
  next: string | null;
}

/** The cursor of the page after `last`. */
export const eventsCursor = (last: ReceivedEvent) => JSON.stringify([last.receivedAt.toISOString(), last.source, last.id]);

/** A cursor from the page's own link, or undefined (the newest page) for anything else. */
export function parseEventsCursor(cursor: string | undefined): { receivedAt: string; source: string; id: string } | undefined {
  if (!cursor || cursor.length > 4000) return undefined;
  try {
    const v: unknown = JSON.parse(cursor);
    if (!Array.isArray(v) || v.length !== 3 || !v.every((x) => typeof x === "string")) return undefined;
    const [receivedAt, source, id] = v as [string, string, string];
    if (Number.isNaN(Date.parse(receivedAt)) || !/^\d{4}-\d{2}-\d{2}T/.test(receivedAt)) return undefined;
    return { receivedAt, source, id };
  } catch {
    return undefined;
  }
}

const COLUMNS: Column<ReceivedEvent>[] = [
  { head: "id", class: "id", cell: (e) => clip(e.id, 200) },
  { head: "source", class: "small", cell: (e) => clip(e.source, 200) },
  { head: "type", cell: (e) => (e.type === null ? <span class="muted">—</span> : clip(e.type, 200)) },
  { head: "time", class: "small", cell: (e) => (e.time === null ? <span class="muted">—</span> : clip(e.time, 64)) },
  { head: "received (UTC)", class: "small", cell: (e) => formatTime(e.receivedAt) },
  {
    head: "woke",
    class: "small",
    cell: (e) =>
      e.woke.length === 0 ? (
        <span class="muted">none</span>
      ) : (
        <>
          {e.woke.map((id, i) => (
            <>
              {i > 0 ? ", " : null}
              <a href={`/ui/instances/${encodeURIComponent(id)}`}>{clip(id, 80)}</a>
            </>
          ))}
        </>
      ),
  },
];

export function EventsPage(p: EventsPageProps) {
  return (
    <>
      <h1>Received events</h1>
      <p class="small muted">CloudEvents this app accepted (a duplicate of one is listed once), newest first, and the instances each started or woke.</p>
      <div class="card">
        <Table columns={COLUMNS} rows={p.events} empty={<span class="muted">No events received (within the dedupe retention).</span>} id="events" />
        {p.next ? (
          <p class="small pager">
            <a href={p.next}>older →</a>
          </p>
        ) : null}
      </div>
    </>
  );
}
