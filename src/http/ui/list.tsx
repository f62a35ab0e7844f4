/** @jsxImportSource hono/jsx */
/**
 * The instance list: filters (status, workflow, time range, id/input search),
 * counts per status under the other filters, keyset paging, live refresh.
 * Filters are plain query parameters, so every view is a bookmarkable URL.
 */
import { INSTANCE_STATUSES, type InstanceStatus } from "../../core/model.ts";
import { parseTagFilters } from "../../core/tags.ts";
import type { InstanceFilter, InstanceRecord } from "../../engine/records.ts";
import { formatTime, relative } from "./format.ts";
import { StatusBadge } from "./layout.tsx";
import { BulkBar } from "./bulk.tsx";
import { Table, type Column } from "./table.tsx";

const RANGES: Record<string, { label: string; ms: number }> = {
  "15m": { label: "last 15 minutes", ms: 15 * 60_000 },
  "1h": { label: "last hour", ms: 3600_000 },
  "24h": { label: "last 24 hours", ms: 86_400_000 },
  "7d": { label: "last 7 days", ms: 7 * 86_400_000 },
};

export interface ListParams {
  status: InstanceStatus[];
  workflow: string;
  q: string;
  /** `key:value`: only instances with this tag (a malformed one is dropped). */
  tag: string;
  range: string;
  /** `datetime-local` values, read as UTC. */
  from: string;
  to: string;
  cursor: string;
}

/** Query parameters → list params; unknown values are dropped rather than refused (it is a page, not an API). */
/** Postgres text cannot hold a NUL, so a filter value is read without one (the query would fail, not match). */
const noNul = (v: string | undefined) => (v ?? "").replaceAll("\u0000", "");

export function readListParams(query: Record<string, string>): ListParams {
  const status = (query.status ?? "")
    .split(",")
    .filter((s): s is InstanceStatus => (INSTANCE_STATUSES as readonly string[]).includes(s));
  return {
    status,
    workflow: noNul(query.workflow).slice(0, 255),
    q: noNul(query.q).slice(0, 200),
    tag: validTag(query.tag),
    // own keys only: `__proto__` or `constructor` must not pick up Object.prototype as a range
    range: query.range && Object.hasOwn(RANGES, query.range) ? query.range : "",
    from: validLocal(query.from),
    to: validLocal(query.to),
    cursor: noNul(query.cursor).slice(0, 1000),
  };
}

function validTag(v: string | undefined): string {
  if (!v) return "";
  try {
    parseTagFilters([v]);
    return v;
  } catch {
    return "";
  }
}

function validLocal(v: string | undefined): string {
  return v && /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?$/.test(v) && !Number.isNaN(Date.parse(`${v}Z`)) ? v : "";
}

export function filterOf(p: ListParams, now: Date): InstanceFilter {
  const f: InstanceFilter = {};
  if (p.workflow) f.workflowName = p.workflow;
  if (p.q) f.search = p.q;
  if (p.tag) f.tags = parseTagFilters([p.tag]);
  const range = Object.hasOwn(RANGES, p.range) ? RANGES[p.range] : undefined;
  if (range) f.startedAfter = new Date(now.getTime() - range.ms);
  if (p.from) f.startedAfter = new Date(`${p.from}Z`);
  if (p.to) f.startedBefore = new Date(`${p.to}Z`);
  return f;
}

/** The list URL for `p` with some parameters changed (empty ones left out). */
export function listUrl(p: ListParams, change: Partial<Record<keyof ListParams, string>>): string {
  const merged: Record<string, string> = { ...p, status: p.status.join(","), cursor: "", ...change };
  const qs = new URLSearchParams(Object.entries(merged).filter(([, v]) => v !== ""));
  const s = qs.toString();
  return s ? `/ui?${s}` : "/ui";
}

export interface ListPageProps {
  params: ListParams;
  workflows: string[];
  counts: Record<InstanceStatus, number>;
  instances: InstanceRecord[];
  nextCursor: string | null;
  now: Date;
}

const INSTANCE_COLUMNS = (now: Date): Column<InstanceRecord>[] => [
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
          <Table class="instances" columns={INSTANCE_COLUMNS(p.now)} rows={p.instances} empty="No instances match." />
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
