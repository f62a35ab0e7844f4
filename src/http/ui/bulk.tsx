/** @jsxImportSource hono/jsx */
/**
 * Bulk actions from the instance list (engine/bulk.ts): the list's bulk bar
 * asks for a dry run first (GET /ui/bulk: how many instances the current
 * filter matches, nothing changes), whose page confirms with a POST that
 * creates the operation and redirects to its progress (total, done, skipped,
 * failed). The confirm form carries the filter resolved at the dry run (a
 * "last hour" range becomes fixed times) and a request id made then, so a
 * double submit finds the same operation instead of making a second one.
 */
import type { Context, Hono } from "hono";
import type { Child } from "hono/jsx";
import { INSTANCE_STATUSES, type InstanceStatus } from "../../core/model.ts";
import { BULK_ACTIONS, bulkView, type BulkOperationView } from "../../engine/bulk.ts";
import type { DispatchScope } from "../../engine/dispatcher.ts";
import type { Engine } from "../../engine/engine.ts";
import type { BulkAction, BulkFilter } from "../../engine/records.ts";
import { formatTime } from "./format.ts";
import { Problem } from "./layout.tsx";
import { filterOf, listUrl, readListParams, type ListParams } from "./list-params.ts";
import type { ViewerEnv } from "./session.ts";
import { Table, type Column } from "./table.tsx";

type C = Context<ViewerEnv>;

const ACTION_TEXT: Record<BulkAction, string> = {
  cancel: "cancel (instances still live; the others are skipped)",
  resume: "resume (quarantined instances; the others are skipped)",
  rerun: "rerun (finished instances, each as a new linked instance; the others are skipped)",
  upgrade: "upgrade (unfinished instances move to this deployment when their history replays with its code; those that do not fail with the mismatch)",
};

const OPERATION_COLUMNS: Column<BulkOperationView>[] = [
  { head: "operation", class: "id", cell: (o) => <a href={`/ui/operations/${encodeURIComponent(o.operationId)}`}>{o.operationId}</a> },
  { head: "action", cell: (o) => o.action },
  { head: "status", cell: (o) => o.status },
  { head: "done / total", class: "small", cell: (o) => `${o.done} / ${o.total}` },
  { head: "skipped", class: "small", cell: (o) => String(o.skipped) },
  { head: "failed", class: "small", cell: (o) => String(o.failed) },
  { head: "created (UTC)", class: "small", cell: (o) => formatTime(o.createdAt) },
];

const actionOf = (v: string | undefined): BulkAction | undefined => BULK_ACTIONS.find((a) => a === v);

/** The bulk bar on the list: the current filter as hidden fields, an action, and the dry run. */
export function BulkBar({ params }: { params: ListParams }) {
  if (params.tag) return <p class="small muted">Bulk actions do not filter by tag: clear the tag filter to act on these instances in bulk.</p>;
  const hidden = { status: params.status.join(","), workflow: params.workflow, q: params.q, range: params.range, from: params.from, to: params.to };
  return (
    <form method="get" action="/ui/bulk" class="filters" id="bulk-form">
      {Object.entries(hidden).map(([k, v]) => (v ? <input type="hidden" name={k} value={v} /> : null))}
      <label>
        bulk action on every instance this filter matches
        <select name="action">
          {BULK_ACTIONS.map((a) => (
            <option value={a}>{a}</option>
          ))}
        </select>
      </label>
      <button type="submit">Count matching (dry run)</button>
    </form>
  );
}

/** Form fields of a resolved filter (the confirm form carries them). */
function filterFields(f: BulkFilter): Record<string, string> {
  return {
    ...(f.workflowName ? { workflow: f.workflowName } : {}),
    ...(f.status?.length ? { status: f.status.join(",") } : {}),
    ...(f.startedAfter ? { startedAfter: f.startedAfter.toISOString() } : {}),
    ...(f.startedBefore ? { startedBefore: f.startedBefore.toISOString() } : {}),
    ...(f.search ? { search: f.search } : {}),
  };
}

/** The filter from the confirm form; unknown statuses and unparsable times are refused, not dropped (they would widen the match). */
function readFilter(form: Record<string, string>): BulkFilter | string {
  const f: BulkFilter = {};
  if (form.workflow) f.workflowName = form.workflow.slice(0, 255);
  if (form.search) f.search = form.search.slice(0, 200);
  if (form.status) {
    const status = form.status.split(",");
    if (!status.every((s) => (INSTANCE_STATUSES as readonly string[]).includes(s))) return "unknown status in the filter";
    f.status = status as InstanceStatus[];
  }
  for (const key of ["startedAfter", "startedBefore"] as const) {
    if (!form[key]) continue;
    const d = new Date(form[key]);
    if (Number.isNaN(d.getTime())) return `${key} is not a time`;
    f[key] = d;
  }
  return f;
}

function describe(f: BulkFilter): string {
  const parts = [
    f.workflowName ? `workflow ${f.workflowName}` : "every workflow",
    f.status?.length ? `status ${f.status.join(" or ")}` : "any status",
    f.startedAfter ? `started after ${formatTime(f.startedAfter)} UTC` : "",
    f.startedBefore ? `started before ${formatTime(f.startedBefore)} UTC` : "",
    f.search ? `id or input containing “${f.search}”` : "",
  ];
  return parts.filter(Boolean).join(", ");
}

export interface BulkRouteDeps {
  engine: (c: C) => Promise<Engine>;
  scope: (c: C) => DispatchScope | undefined;
  render: (c: C, title: string, body: Child, status?: number) => Response | Promise<Response>;
  formValues: (c: C) => Promise<Record<string, string>>;
  notice: (c: C) => string | undefined;
}

export function bulkRoutes(ui: Hono<ViewerEnv>, d: BulkRouteDeps): void {
  ui.get("/bulk", async (c) => {
    const params = readListParams(c.req.query());
    const action = actionOf(c.req.query("action"));
    const back = listUrl(params, {});
    if (!action || params.tag) return d.render(c, "Bulk action", <Problem message={params.tag ? "bulk actions do not filter by tag" : "choose an action: cancel, resume or rerun"} />, 400);
    const { tags: _tags, ...rest } = filterOf(params, new Date());
    const filter: BulkFilter = { ...rest, ...(params.status.length ? { status: params.status } : {}) };
    const count = await (await d.engine(c)).countMatching(filter);
    const fields = { ...filterFields(filter), action, requestId: `ui-${crypto.randomUUID()}` };
    return d.render(
      c,
      "Bulk action",
      <>
        <p class="small">
          <a href={back}>← instances</a>
        </p>
        <h1>Bulk {action}</h1>
        <div class="card">
          <p id="bulk-count">
            <strong>{count}</strong> instance{count === 1 ? "" : "s"} match now: {describe(filter)}.
          </p>
          <p class="small muted">Action: {ACTION_TEXT[action]}. Instances started after you confirm are not matched.</p>
          {count > 0 ? (
            <form method="post" action="/ui/bulk" id="bulk-confirm">
              {Object.entries(fields).map(([k, v]) => (
                <input type="hidden" name={k} value={v} />
              ))}
              <button type="submit" class={action === "cancel" ? "danger" : ""}>
                Confirm: {action} {count} instance{count === 1 ? "" : "s"}
              </button>{" "}
              <a href={back} class="small">
                back
              </a>
            </form>
          ) : null}
        </div>
      </>,
    );
  });

  ui.post("/bulk", async (c) => {
    const form = await d.formValues(c);
    const action = actionOf(form.action);
    const filter = readFilter(form);
    const requestId = /^[A-Za-z0-9_.:-]{1,100}$/.test(form.requestId ?? "") ? form.requestId : undefined;
    if (!action || typeof filter === "string") return d.render(c, "Bulk action", <Problem message={typeof filter === "string" ? filter : "choose an action: cancel, resume or rerun"} />, 422);
    const r = await (await d.engine(c)).startBulk({ filter, action, ...(requestId ? { requestId } : {}) }, {}, d.scope(c));
    return c.redirect(`/ui/operations/${encodeURIComponent(r.operation.operationId)}?notice=bulk`, 303);
  });

  ui.get("/operations", async (c) => {
    const ops = (await (await d.engine(c)).listBulkOperations(50)).map(bulkView);
    return d.render(
      c,
      "Operations",
      <>
        <h1>Bulk operations</h1>
        <div class="card" data-live="operations">
          <Table
            id="operations"
            columns={OPERATION_COLUMNS}
            rows={ops}
            empty="None yet: start one from the instance list's bulk bar."
          />
        </div>
      </>,
    );
  });

  ui.get("/operations/:id", async (c) => {
    const op = await (await d.engine(c)).bulkOperation(c.req.param("id"));
    if (!op) return d.render(c, "Error", <Problem message={`operation "${c.req.param("id")}" not found`} />, 404);
    const v = bulkView(op);
    const notice = d.notice(c);
    return d.render(
      c,
      `Operation ${v.operationId}`,
      <>
        <p class="small">
          <a href="/ui/operations">← operations</a>
        </p>
        <h1>Bulk {v.action}</h1>
        {notice ? <div class="notice">{notice}</div> : null}
        <div class="card" data-live="operation" id="operation">
          {v.status === "completed" ? <span data-final hidden /> : null}
          <dl class="kv">
            <dt>status</dt>
            <dd id="op-status">{v.status}</dd>
            <dt>filter</dt>
            <dd>{describe(op.filter)}</dd>
            <dt>total</dt>
            <dd id="op-total">{v.total}</dd>
            <dt>done</dt>
            <dd id="op-done">{v.done}</dd>
            <dt>skipped</dt>
            <dd id="op-skipped">{v.skipped}</dd>
            <dt>failed</dt>
            <dd id="op-failed">{v.failed}</dd>
            <dt>created</dt>
            <dd>{formatTime(v.createdAt)} UTC</dd>
          </dl>
          {v.errors.length ? (
            <ul class="small" id="op-errors">
              {v.errors.map((e) => (
                <li>
                  <a href={`/ui/instances/${encodeURIComponent(e.instanceId)}`}>{e.instanceId}</a>: {e.error}
                </li>
              ))}
            </ul>
          ) : null}
        </div>
      </>,
    );
  });
}
