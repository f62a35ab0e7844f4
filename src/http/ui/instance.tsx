/** @jsxImportSource hono/jsx */
/**
 * The instance page: status, input/output/error (with its cause chain), what
 * the instance waits on now, the timeline of its history, compensations,
 * subscriptions, groups, archived `recur` runs, and the actions that apply
 * (cancel, send a message).
 */
import type { Child } from "hono/jsx";
import type { InstanceView } from "../../engine/engine.ts";
import type { SerializedError } from "../../core/serialization.ts";
import { CANCELLABLE_STATUSES, TERMINAL_STATUSES, type HistoryEvent } from "../../core/model.ts";
import type { ArchivedRunSummary, ChildSummary, CompensationRecord, GroupMembership, SubscriptionRecord, TimerRecord } from "../../engine/records.ts";
import { MessageForm } from "./channels.tsx";
import { formatDuration, formatTime, parseStored, prettyJson, preview, relative } from "./format.ts";
import { Problem, StatusBadge } from "./layout.tsx";
import { Table, type Column } from "./table.tsx";
import { buildTimeline, causeChain, type TimelineEntry } from "./timeline.ts";

export interface InstancePageProps {
  view: InstanceView & { children?: ChildSummary[] };
  history: HistoryEvent[];
  timers: TimerRecord[];
  subscriptions: SubscriptionRecord[];
  groups: GroupMembership[];
  compensations: CompensationRecord[];
  runs: ArchivedRunSummary[];
  /** The archived run being shown, with its history. */
  archived: { run: number; history: HistoryEvent[] } | null;
  now: Date;
  notice?: string | undefined;
  problem?: { message: string; issues?: { path?: PropertyKey[]; message: string }[] | undefined } | undefined;
  /** Values of the message form (kept after a refused send). */
  message?: { channel: string; data: string } | undefined;
}

interface StoredError {
  error_type?: string;
  error_message?: string;
  stack?: string;
  cause?: SerializedError;
}

const iid = (id: string) => encodeURIComponent(id);

function Json({ value }: { value: unknown }) {
  return <pre>{prettyJson(value)}</pre>;
}

function ErrorChain({ chain }: { chain: SerializedError[] }) {
  return (
    <ol class="small">
      {chain.map((e, i) => (
        <li>
          {i > 0 ? <span class="muted">caused by </span> : null}
          <strong>{e.name}</strong>: {e.message}
          {e.stack ? (
            <details>
              <summary class="muted">stack</summary>
              <pre>{e.stack}</pre>
            </details>
          ) : null}
        </li>
      ))}
    </ol>
  );
}

/** The failure with its causes: the stored error, or the recorded activity error it came from (which keeps the chain). */
function failureChain(error: StoredError, timeline: TimelineEntry[]): SerializedError[] {
  const top: SerializedError = { name: error.error_type ?? "Error", message: error.error_message ?? "", ...(error.stack ? { stack: error.stack } : {}), ...(error.cause ? { cause: error.cause } : {}) };
  if (top.cause) return causeChain(top);
  const source = [...timeline].reverse().find((e) => e.kind === "failed" && e.error && e.error.name === top.name && e.error.message === top.message);
  return source?.error ? causeChain(source.error) : [top];
}

function Timeline({ entries, now }: { entries: TimelineEntry[]; now?: Child }) {
  return (
    <ol class="timeline">
      {entries.map((e) => (
        <li class={e.bad ? "bad" : ""} data-kind={e.kind}>
          <div class="small mono">{formatTime(e.at).slice(11)}</div>
          <div class="small muted" title="time since the previous entry">
            +{formatDuration(e.sinceMs)}
          </div>
          <div>
            <span class={`badge k-${e.kind}`}>{e.kind.replace("-", " ")}</span> <strong>{e.name}</strong> <code class="muted">{e.activityId}</code>
            {e.note ? <span class="small"> — {e.note}</span> : null}
            {e.error ? (
              <div class="small">
                <strong>{e.error.name}</strong>: {e.error.message}
              </div>
            ) : null}
            <details>
              <summary class="small muted">{e.error ? "error record" : `recorded ${preview(e.detail, 80)}`}</summary>
              <Json value={e.error ?? e.detail} />
            </details>
          </div>
        </li>
      ))}
      {now ?? null}
    </ol>
  );
}

function WaitingNow(p: { view: InstanceView; timers: TimerRecord[]; subscriptions: SubscriptionRecord[]; now: Date }) {
  const waits = p.subscriptions.filter((s) => s.activityId !== null);
  const items: Child[] = [];
  for (const t of p.timers) {
    const retry = /#retry(\d+)$/.exec(t.timerId);
    items.push(
      <li>
        {retry ? `retry backoff of ${t.timerId.replace(/#.*$/, "")}` : `timer ${t.timerId}`} due at <strong>{formatTime(t.expiresAt)}</strong>{" "}
        <span class="muted">({relative(t.expiresAt, p.now)})</span>
      </li>,
    );
  }
  for (const s of waits) {
    items.push(
      <li>
        message on channel <a href={`/ui/channels/${encodeURIComponent(s.channel)}`}>{s.channel}</a> <span class="muted">({s.mode}, at {s.activityId})</span>
        {s.timeoutAt ? (
          <>
            {" "}
            — times out at <strong>{formatTime(s.timeoutAt)}</strong> <span class="muted">({relative(s.timeoutAt, p.now)})</span>
          </>
        ) : (
          " — no timeout"
        )}
      </li>,
    );
  }
  if (items.length === 0) {
    const s = p.view.status;
    if (s === "running") items.push(<li>runnable{p.view.currentActivityId ? ` at ${p.view.currentActivityId}` : ""}: its next step is dispatched or in flight</li>);
    else if (s === "compensating") items.push(<li>running its compensations, newest first</li>);
    else return null;
  }
  return (
    <li class="now" data-kind="now">
      <div class="small mono">now</div>
      <div class="small muted">{formatDuration(p.now.getTime() - new Date(p.view.updatedAt).getTime())}</div>
      <div>
        <span class="badge s-waiting_for_timer">waiting</span>
        <ul class="small" id="waiting-now">
          {items}
        </ul>
      </div>
    </li>
  );
}

function compensationState(c: CompensationRecord, history: HistoryEvent[], status: string): string {
  const ev = history.find((h) => h.activityId === `compensate:${c.activityId}`);
  if (ev) return ev.eventType === "CompensationExecuted" ? "done" : "failed";
  if (status === "compensating") return "pending";
  return status === "completed" ? "not needed" : "registered";
}

const CHILD_COLUMNS: Column<ChildSummary>[] = [
  { class: "id", cell: (ch) => <a href={`/ui/instances/${encodeURIComponent(ch.instanceId)}`}>{ch.instanceId}</a> },
  { cell: (ch) => ch.workflowName },
  { cell: (ch) => <StatusBadge status={ch.status} /> },
  { class: "small muted", cell: (ch) => (ch.detached ? "detached" : "") },
];

const compensationColumns = (history: HistoryEvent[], status: string): Column<CompensationRecord>[] => [
  { head: "compensation", cell: (c) => c.activityName },
  { head: "registered at", cell: (c) => <code>{c.activityId}</code> },
  { head: "arguments", class: "mono small", cell: (c) => preview(parseStored(c.args), 100) },
  { head: "state", cell: (c) => compensationState(c, history, status) },
];

const SUBSCRIPTION_COLUMNS: Column<SubscriptionRecord>[] = [
  { cell: (s) => <a href={`/ui/channels/${encodeURIComponent(s.channel)}`}>{s.channel}</a> },
  { cell: (s) => s.mode },
  { class: "small", cell: (s) => (s.activityId ? `waiting (${s.activityId})` : "idle") },
];

const runColumns = (instanceId: string): Column<ArchivedRunSummary>[] => [
  { cell: (r) => <a href={`/ui/instances/${iid(instanceId)}?run=${r.run}#archived`}>run {r.run}</a> },
  { class: "small", cell: (r) => `${r.events} events` },
  { class: "small muted", cell: (r) => `archived ${formatTime(r.archivedAt)}` },
];

/** The flow-control keys the instance got; for a `queued` one, what it waits for. */
function FlowControl({ view }: { view: InstanceView }) {
  const fc = view.flowControl;
  if (!fc) return null;
  const parts: Child[] = [];
  if (fc.concurrencyKey !== null) parts.push(<>a slot of concurrency key <code>{fc.concurrencyKey}</code></>);
  if (fc.rateKey !== null) parts.push(<>rate key <code>{fc.rateKey}</code>{fc.admittedAt ? ` (admitted ${formatTime(fc.admittedAt)} UTC)` : null}</>);
  if (fc.singletonKey !== null) parts.push(<>singleton key <code>{fc.singletonKey}</code></>);
  if (fc.debounceKey !== null) parts.push(<>debounce key <code>{fc.debounceKey}</code>{fc.notBefore ? ` (starts not before ${formatTime(fc.notBefore)} UTC)` : null}</>);
  const queued = view.status === "queued";
  return (
    <>
      <dt>{queued ? "queued" : "flow control"}</dt>
      <dd id={queued ? "queued" : "flow-control"}>
        {queued ? "waits for " : null}
        {parts.map((part, i) => (
          <>
            {i > 0 ? "; " : null}
            {part}
          </>
        ))}
      </dd>
    </>
  );
}

export function InstancePage(p: InstancePageProps) {
  const { view } = p;
  const timeline = buildTimeline(p.history, new Date(view.startedAt));
  const terminal = TERMINAL_STATUSES.includes(view.status);
  const cancellable = CANCELLABLE_STATUSES.includes(view.status);
  const error = view.error as StoredError | null;
  const waitingChannel = p.subscriptions.find((s) => s.activityId !== null)?.channel ?? "";
  return (
    <>
      <p class="small">
        <a href={`/ui?workflow=${encodeURIComponent(view.workflowName)}`}>← {view.workflowName} instances</a>
      </p>
      <h1>{view.instanceId}</h1>
      {p.notice ? <div class="notice">{p.notice}</div> : null}
      {p.problem ? <Problem message={p.problem.message} issues={p.problem.issues} /> : null}
      <div data-live="summary">
        {terminal ? <span data-final hidden /> : null}
        <div class="grid">
          <section class="card">
            <dl class="kv">
              <dt>status</dt>
              <dd id="status">
                <StatusBadge status={view.status} />
              </dd>
              <dt>workflow</dt>
              <dd>{view.workflowName}</dd>
              <FlowControl view={view} />
              {view.parentInstanceId ? (
                <>
                  <dt>parent</dt>
                  <dd>
                    <a id="parent-link" href={`/ui/instances/${encodeURIComponent(view.parentInstanceId)}`}>
                      {view.parentInstanceId}
                    </a>
                  </dd>
                </>
              ) : null}
              {view.deadlineAt && !terminal ? (
                <>
                  <dt>deadline</dt>
                  <dd>
                    {formatTime(view.deadlineAt)} UTC <span class="muted">({relative(new Date(view.deadlineAt), p.now)})</span>
                  </dd>
                </>
              ) : null}
              <dt>run</dt>
              <dd>{view.run}</dd>
              <dt>started</dt>
              <dd>{formatTime(view.startedAt)} UTC</dd>
              <dt>updated</dt>
              <dd>
                {formatTime(view.updatedAt)} UTC <span class="muted">({relative(new Date(view.updatedAt), p.now)})</span>
              </dd>
              {terminal ? (
                <>
                  <dt>took</dt>
                  <dd>{formatDuration(new Date(view.updatedAt).getTime() - new Date(view.startedAt).getTime())}</dd>
                </>
              ) : null}
              {view.currentActivityId ? (
                <>
                  <dt>current</dt>
                  <dd>
                    <code>{view.currentActivityId}</code>
                  </dd>
                </>
              ) : null}
            </dl>
          </section>
          <section class="card">
            <h2>Input</h2>
            <Json value={view.input} />
            {view.status === "completed" ? (
              <>
                <h2>Output</h2>
                <div id="output">
                  <Json value={view.output} />
                </div>
              </>
            ) : null}
          </section>
        </div>
        {error ? (
          <section class="card" id="error">
            <h2>Error</h2>
            <ErrorChain chain={failureChain(error, timeline)} />
          </section>
        ) : null}
        {view.children?.length ? (
          <section class="card" id="children">
            <h2>Children</h2>
            <Table columns={CHILD_COLUMNS} rows={view.children} empty="None." />
          </section>
        ) : null}
        {view.failure ? (
          <section class="card" id="failure">
            <h2>{view.status === "quarantined" ? "Quarantined" : "Last failure"}</h2>
            <p>
              <strong>{view.failure.errorType}</strong>: {view.failure.message}
            </p>
            <p class="small muted">
              {view.failure.attempts} failure(s) in a row in {view.failure.task.replace(/_/g, " ")}, last at {view.failure.at}
              {view.status === "quarantined" ? `; resuming puts it back to ${view.failure.previousStatus ?? "running"}` : ""}
            </p>
          </section>
        ) : null}
        {view.cancellation ? (
          <section class="card" id="cancellation">
            <h2>Cancellation</h2>
            <Json value={view.cancellation} />
          </section>
        ) : null}
      </div>

      <h2>Timeline</h2>
      <div class="card" data-live="timeline" id="timeline">
        {timeline.length === 0 && terminal ? <p class="muted">No history.</p> : null}
        <Timeline entries={timeline} now={terminal ? null : <WaitingNow view={view} timers={p.timers} subscriptions={p.subscriptions} now={p.now} />} />
      </div>

      <div data-live="compensations">
        {p.compensations.length ? (
          <>
            <h2>Compensations</h2>
            <div class="card" id="compensations">
              <p class="small muted">Newest first: the order they run in.</p>
              <Table columns={compensationColumns(p.history, view.status)} rows={p.compensations} empty="None." />
            </div>
          </>
        ) : null}
      </div>

      <div class="grid" data-live="links">
        <section class="card" id="subscriptions">
          <h2>Subscriptions</h2>
          <Table columns={SUBSCRIPTION_COLUMNS} rows={p.subscriptions} empty="None." />
          <h2>Groups</h2>
          {p.groups.length === 0 ? <p class="muted small">None.</p> : <ul>{p.groups.map((g) => <li>{g.group}</li>)}</ul>}
        </section>
        <section class="card" id="runs">
          <h2>Archived runs</h2>
          <Table columns={runColumns(view.instanceId)} rows={p.runs} empty="None: this instance has not recurred." />
        </section>
      </div>

      {p.archived ? (
        <>
          <h2 id="archived">Run {p.archived.run} (archived)</h2>
          <div class="card">
            <Timeline entries={buildTimeline(p.archived.history, p.archived.history[0]?.createdAt ?? new Date(view.startedAt))} />
          </div>
        </>
      ) : null}

      <div data-live="actions">
      {terminal ? null : (
        <>
          <h2>Actions</h2>
          <div class="actions">
            <MessageForm action={`/ui/instances/${iid(view.instanceId)}/messages`} id="message-form" button="Send message" channel={p.message?.channel ?? waitingChannel} data={p.message?.data} />
            {view.status === "quarantined" ? (
              <form method="post" action={`/ui/instances/${iid(view.instanceId)}/resume`} class="card" id="resume-form">
                <p class="small muted">Resume: back to {view.failure?.previousStatus ?? "running"} with the failure count reset (fix the cause first).</p>
                <button type="submit">Resume instance</button>
              </form>
            ) : null}
            {cancellable ? (
              <form method="post" action={`/ui/instances/${iid(view.instanceId)}/cancel`} class="card" id="cancel-form">
                <p class="small muted">Cancel: compensations run newest first, then the instance ends cancelled.</p>
                <button type="submit" class="danger">
                  Cancel instance
                </button>
              </form>
            ) : null}
          </div>
        </>
      )}
      </div>
    </>
  );
}
