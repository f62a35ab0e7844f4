/**
 * The CloudEvents this app accepted, for operators (the viewer's received
 * events page): the dedupe record of each (`cloudevent_dedupe`, kept for the
 * dedupe retention) carries the event's type, time and the channel message
 * it became, and the instance an event-handler workflow started for it.
 * Which instances it woke is read, not stored: whoever claimed or received
 * that message (claims and receipts, kept with the message for the channel
 * retention), plus the started instance. Read-only and bounded: one page of
 * events, at most WOKEN_MAX instances each.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { toDate, type Row } from "./rows.ts";

export const WOKEN_MAX = 20;

export interface ReceivedEvent {
  source: string;
  id: string;
  /** Null for events stored before the type was recorded. */
  type: string | null;
  time: string | null;
  receivedAt: Date;
  /** Instances it started or that took its message, at most WOKEN_MAX. */
  woke: string[];
}

export interface ReceivedEventsArea {
  /** The instance an event-handler workflow started for the event `(source, id)`. */
  noteCloudEventStart(source: string, id: string, instanceId: string): Promise<void>;
  /** Received events, newest first; `before` is the previous page's last `receivedAt` (ISO) and `(source, id)`. */
  listReceivedEvents(limit: number, before?: { receivedAt: string; source: string; id: string }): Promise<ReceivedEvent[]>;
}

export function receivedEventsArea(ex: Executor): ReceivedEventsArea {
  return {
    async noteCloudEventStart(source, id, instanceId) {
      await ex.execute(sql`UPDATE cloudevent_dedupe SET started_instance_id = ${instanceId} WHERE source = ${source} AND event_id = ${id}`);
    },
    async listReceivedEvents(limit, before) {
      const after = before
        ? sql`WHERE (d.received_at, d.source, d.event_id) < (${before.receivedAt}::timestamptz, ${before.source}::text, ${before.id}::text)`
        : sql``;
      const rows = await queryRows<Row>(
        ex,
        sql`SELECT d.source, d.event_id, d.event_type, d.event_time, d.received_at,
                   ARRAY(SELECT w FROM (
                     SELECT d.started_instance_id AS w WHERE d.started_instance_id IS NOT NULL
                     UNION SELECT cl.instance_id FROM channel_message_claims cl WHERE cl.message_id = d.message_id
                     UNION SELECT r.instance_id FROM channel_message_receipts r WHERE r.message_id = d.message_id
                   ) u ORDER BY w LIMIT ${WOKEN_MAX}) AS woke
            FROM cloudevent_dedupe d ${after}
            ORDER BY d.received_at DESC, d.source DESC, d.event_id DESC
            LIMIT ${limit}::int`,
      );
      return rows.map((r) => ({
        source: String(r.source),
        id: String(r.event_id),
        type: r.event_type === null ? null : String(r.event_type),
        time: r.event_time === null ? null : String(r.event_time),
        receivedAt: toDate(r.received_at),
        woke: parseArray(r.woke),
      }));
    },
  };
}

/** A text[] as the drivers return it: an array (postgres.js, PGlite) or its literal (`{a,b}`). */
function parseArray(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(String);
  if (typeof v !== "string" || v === "{}") return [];
  return v.slice(1, -1).split(",").map((s) => s.replace(/^"|"$/g, ""));
}
