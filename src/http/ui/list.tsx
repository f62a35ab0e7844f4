/** @jsxImportSource hono/jsx */
/**
 * The instance list: filters (status, workflow, time range, id/input search),
 * counts per status under the other filters, keyset paging, live refresh.
 * Filters are plain query parameters, so every view is a bookmarkable URL.
 */
import { INSTANCE_STATUSES, type InstanceStatus } from "../../core/model.ts";
import type { InstanceRecord } from "../../engine/records.ts";
import { formatTime, relative } from "./format.ts";
import { StatusBadge } from "./layout.tsx";
import { BulkBar } from "./bulk.tsx";
import { listUrl, RANGES, type ListParams } from "./list-params.ts";
import { Table, type Column } from "./table.tsx";
import type { WhyReason } from "../../engine/why-view.ts";
import { WhyCell } from "./why.tsx";
import type { DeploymentView } from "../../engine/deployment.ts";

/** "Still draining: rel-1 (4 waiting for message)": the older deployments whose instances have not finished. */
function Draining(p: { deployments: readonly DeploymentView[] }) {
  if (!p.deployments.length) return null;
  const work = (d: DeploymentView) =>
    Object.entries(d.instances)
      .filter(([, n]) => (n ?? 0) > 0)
      .map(([s, n]) => `${n} ${s.replace(/_/g, " ")}`)
      .join(", ");
  return (
    <p class="small draining">
      Deployments still draining:{" "}
      {p.deployments.slice(0, 10).map((d, i) => (
        <>
          {i ? "; " : ""}
          <code>{d.id ?? "(unrecorded)"}</code> ({work(d)})
        </>
      ))}
      {p.deployments.length > 10 ? ` and ${p.deployments.length - 10} more` : ""} — GET /deployments
    </p>
  );
}

export interface ListPageProps {
  params: ListParams;
  workflows: string[];
  counts: Record<InstanceStatus, number>;
  instances: InstanceRecord[];
  nextCursor: string | null;
  now: Date;
  /** Each listed instance's reason (engine/why.ts), by id: the why column. */
  why?: ReadonlyMap<string, WhyReason>;
  /** Older deployments that still have unfinished instances (GET /deployments' `draining`). */
  draining?: readonly DeploymentView[];
}

const INSTANCE_COLUMNS = (now: Date, why: ReadonlyMap<string, WhyReason> | undefined): Column<InstanceRecord>[] => [
  {
    head: "instance",
    class: "id",
    cell: (i) => (
      <>
        <a href={`/ui/instances/${encodeURIComponent(i.instanceId)}`}>{i.instanceId}</a>
        {i.run > 1 ? <span class="muted small"> run {i.run}</span> : null}
        {i.parentInstanceId ? (
          <div class="small muted">
            child of <a href={`/ui/instances/${encodeURIComponent(i.parentInstanceId)}`}>{i.parentInstanceId}</a>
          </div>
        ) : null}
      </>
    ),
  },
  { head: "workflow", cell: (i) => i.workflowName },
  { head: "status", cell: (i) => <StatusBadge status={i.status} /> },
  { head: "why", class: "why-cell", cell: (i) => <WhyCell reason={why?.get(i.instanceId)} /> },
  { head: "started (UTC)", class: "small", cell: (i) => formatTime(i.startedAt) },
  { head: "updated", class: "small muted", cell: (i) => relative(i.updatedAt, now) },
];

export function ListPage(p: ListPageProps) {
  const { params } = p;
  const total = Object.values(p.counts).reduce((a, b) => a + b, 0);
  const only = params.status.length === 1 ? params.status[0] : undefined;
  return (
    <>
      <h1>Instances</h1>
      <Draining deployments={p.draining ?? []} />
      <form class="filters" method="get" action="/ui">
        <label>
          search id or input
          <input type="search" name="q" value={params.q} placeholder="order-42" />
        </label>
        <label>
          tag
          <input type="search" name="tag" value={params.tag} placeholder="orderId:o1" />
        </label>
        <label>
          workflow
          <select name="workflow">
            <option value="">all</option>
            {p.workflows.map((w) => (
              <option value={w} selected={w === params.workflow}>
                {w}
              </option>
            ))}
          </select>
        </label>
        <label>
          status
          <select name="status">
            <option value="">all</option>
            {INSTANCE_STATUSES.map((s) => (
              <option value={s} selected={s === only}>
                {s.replace(/_/g, " ")}
              </option>
            ))}
          </select>
        </label>
        <label>
          started
          <select name="range">
            <option value="">any time</option>
            {Object.entries(RANGES).map(([k, r]) => (
              <option value={k} selected={k === params.range}>
                {r.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          from (UTC)
          <input type="datetime-local" name="from" value={params.from} />
        </label>
        <label>
          to (UTC)
          <input type="datetime-local" name="to" value={params.to} />
        </label>
        <button type="submit">Filter</button>
        <a href="/ui" class="small">
          reset
        </a>
      </form>
      <BulkBar params={params} />
      <div data-live="list">
        <nav class="counts" aria-label="counts per status">
          <a href={listUrl(params, { status: "" })} class={params.status.length === 0 ? "on" : ""}>
            <b>{total}</b>all
          </a>
          {INSTANCE_STATUSES.map((s) => (
            <a href={listUrl(params, { status: s })} class={only === s ? "on" : ""} data-status={s}>
              <b>{p.counts[s]}</b>
              <span class={`s-${s}`}>{s.replace(/_/g, " ")}</span>
            </a>
          ))}
        </nav>
        <div class="card">
          <Table class="instances" columns={INSTANCE_COLUMNS(p.now, p.why)} rows={p.instances} empty="No instances match." />
          <div class="pager">
            {params.cursor ? <a href={listUrl(params, {})}>← newest</a> : null}
            {p.nextCursor ? (
              <a href={listUrl(params, { cursor: p.nextCursor })} rel="next">
                older →
              </a>
            ) : null}
          </div>
        </div>
      </div>
    </>
  );
}
