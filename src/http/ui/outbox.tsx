/** @jsxImportSource hono/jsx */
/**
 * The outbox's dead letters (engine/dead-letters.ts): each with its status,
 * attempts and stored error, filtered by status, paged newest first, with the
 * two operator actions — redeliver (re-arm, relayed now) and discard.
 */
import type { DeadLetterView } from "../../engine/dead-letters.ts";
import { DEAD_LETTER_STATUSES, type DeadLetterStatus } from "../../engine/records.ts";
import { formatTime, relative } from "./format.ts";
import { Problem, StatusBadge } from "./layout.tsx";
import { Table, type Column } from "./table.tsx";

export interface OutboxPageProps {
  events: DeadLetterView[];
  nextCursor: string | null;
  status: DeadLetterStatus | "";
  cursor: string;
  now: Date;
  notice?: string | undefined;
  problem?: string | undefined;
}

const eid = (id: string) => encodeURIComponent(id);
const outboxUrl = (status: string, cursor = "") => {
  const qs = new URLSearchParams(Object.entries({ status, cursor }).filter(([, v]) => v !== "")).toString();
  return qs ? `/ui/outbox?${qs}` : "/ui/outbox";
};

const COLUMNS = (now: Date): Column<DeadLetterView>[] => [
  {
    head: "event",
    class: "id",
    cell: (e) => (
      <>
        {e.eventId}
        <div class="small muted">
          {e.type} · {e.source}
        </div>
      </>
    ),
  },
  { head: "status", cell: (e) => <StatusBadge status={e.status} /> },
  { head: "attempts", cell: (e) => e.attempts },
  { head: "error", class: "small", cell: (e) => e.lastError ?? <span class="muted">—</span> },
  {
    head: "written (UTC)",
    class: "small",
    cell: (e) => (
      <>
        {formatTime(e.createdAt)}
        {e.rearmedAt ? <div class="muted">re-armed {relative(new Date(e.rearmedAt), now)}</div> : null}
      </>
    ),
  },
  {
    head: "",
    cell: (e) => (
      <div class="actions">
        <form method="post" action={`/ui/outbox/${eid(e.eventId)}/redeliver`} data-action="redeliver">
          <button type="submit">Redeliver</button>
        </form>
        <form method="post" action={`/ui/outbox/${eid(e.eventId)}/discard`} data-action="discard">
          <button type="submit" class="danger">
            Discard
          </button>
        </form>
      </div>
    ),
  },
];

export function OutboxPage(p: OutboxPageProps) {
  return (
    <>
      <h1>Outbox dead letters</h1>
      {p.notice ? <div class="notice">{p.notice}</div> : null}
      {p.problem ? <Problem message={p.problem} /> : null}
      <p class="small muted">
        Events the relay set aside: <b>invalid</b> (the broker refused it, or it is not a valid CloudEvent) or <b>expired</b> (out of attempts or age). Redeliver puts
        one back with its attempts reset and relays it now; discard deletes it.
      </p>
      <nav class="counts" aria-label="filter by status">
        {["", ...DEAD_LETTER_STATUSES].map((s) => (
          <a href={outboxUrl(s)} class={p.status === s ? "on" : ""} data-status={s || "all"}>
            {s || "all"}
          </a>
        ))}
      </nav>
      <div class="card" data-live="outbox">
        <Table id="dead-letters" columns={COLUMNS(p.now)} rows={p.events} empty="No dead letters." />
        <div class="pager">
          {p.cursor ? <a href={outboxUrl(p.status)}>← newest</a> : null}
          {p.nextCursor ? (
            <a href={outboxUrl(p.status, p.nextCursor)} rel="next">
              older →
            </a>
          ) : null}
        </div>
      </div>
    </>
  );
}
