/** @jsxImportSource hono/jsx */
/**
 * The app's scheduled workflows: cron, time zone, missed-tick policy, next and
 * last run, paused state, and the controls (pause, resume, trigger now) as
 * same-origin form posts.
 */
import type { ScheduleRecord } from "../../engine/records.ts";
import type { Child } from "hono/jsx";
import { formatTime, relative } from "./format.ts";
import { Problem } from "./layout.tsx";
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
      s.pausedAt ? (
        <>
          <span class="badge s-paused">paused</span> <span class="muted">since {formatTime(s.pausedAt)}</span>
        </>
      ) : s.nextRunAt ? (
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
  {
    head: "control",
    class: "small control",
    cell: (s) => {
      const base = `/ui/schedules/${encodeURIComponent(s.workflowName)}`;
      const button = (action: string, label: string): Child => (
        <form method="post" action={`${base}/${action}`} class="inline" data-action={action}>
          <button type="submit" class="small">
            {label}
          </button>
        </form>
      );
      return (
        <>
          {s.pausedAt ? button("resume", "Resume") : button("pause", "Pause")} {button("trigger", "Trigger now")}
        </>
      );
    },
  },
];

export function SchedulesPage(p: { schedules: ScheduleRecord[]; now: Date; notice?: string | undefined; problem?: string | undefined }) {
  return (
    <>
      <h1>Schedules</h1>
      {p.notice ? <div class="notice">{p.notice}</div> : null}
      {p.problem ? <Problem message={p.problem} /> : null}
      <div class="card" data-live="schedules">
        <Table id="schedules" columns={COLUMNS(p.now)} rows={p.schedules} empty="No workflow has a schedule." />
        <p class="small muted">The sweep is the clock: a tick starts its instance at the first sweep after it is due. A paused schedule starts no tick until resumed (then from its next tick after now; missed ticks are not started); Trigger now starts one instance, paused or not.</p>
      </div>
    </>
  );
}
