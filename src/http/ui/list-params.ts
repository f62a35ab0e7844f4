/**
 * The instance list's filters as query parameters: read (unknown values
 * dropped), turned into an engine filter, and written back as a list URL.
 * Shared by the list page and its bulk bar.
 */
import { INSTANCE_STATUSES, type InstanceStatus } from "../../core/model.ts";
import { parseTagFilters } from "../../core/tags.ts";
import type { InstanceFilter } from "../../engine/records.ts";

export const RANGES: Record<string, { label: string; ms: number }> = {
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

