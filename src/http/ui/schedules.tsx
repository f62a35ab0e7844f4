/** @jsxImportSource hono/jsx */
/** The app's scheduled workflows: cron, time zone, missed-tick policy, next and last run. */
import type { ScheduleRecord } from "../../engine/records.ts";
import { formatTime, relative } from "./format.ts";
import { Table, type Column } from "./table.tsx";

const COLUMNS = (now: Date): Column<ScheduleRecord>[] => [
  { head: "workflow", class: "id", cell: (s) => <a href={`/ui?workflow=${encodeURIComponent(s.workflowName)}`}>{s.workflowName}</a> },
  { head: "cron", cell: (s) => <code>{s.cron}</code> },
  { head: "time zone", class: "small", cell: (s) => s.timezone },
  { head: "missed ticks", class: "small", cell: (s) => s.missed },
  {
    head: "next run (UTC)",
    class: "small next-run",
    cell: (s) =>
      s.nextRunAt ? (
        <>
          {formatTime(s.nextRunAt)} <span class="muted">({relative(s.nextRunAt, now)})</span>
        </>
      ) : (
        <span class="muted">never again</span>
      ),
  },
  {
    head: "last run",
    class: "small last-run",
    cell: (s) =>
      s.lastRunAt ? (
        <>
          {formatTime(s.lastRunAt)}
          {s.lastInstanceId ? (
            <div>
              <a href={`/ui/instances/${encodeURIComponent(s.lastInstanceId)}`}>{s.lastInstanceId}</a>
            </div>
          ) : null}
        </>
      ) : (
        <span class="muted">not yet</span>
      ),
  },
];

export function SchedulesPage(p: { schedules: ScheduleRecord[]; now: Date }) {
  return (
    <>
      <h1>Schedules</h1>
      <div class="card" data-live="schedules">
        <Table id="schedules" columns={COLUMNS(p.now)} rows={p.schedules} empty="No workflow has a schedule." />
        <p class="small muted">The sweep is the clock: a tick starts its instance at the first sweep after it is due.</p>
      </div>
    </>
  );
}
