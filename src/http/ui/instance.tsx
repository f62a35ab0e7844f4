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
import { CANCELLABLE_STATUSES, HOOK_LISTENING_STATUSES, TERMINAL_STATUSES, type HistoryEvent, type WaitStatus } from "../../core/model.ts";
import type { ArchivedRunSummary, ChildSummary, CompensationRecord, GroupMembership, SubscriptionRecord, TimerRecord, WaitWebhookRecord } from "../../engine/records.ts";
import { MessageForm } from "./channels.tsx";
import { clip, formatDuration, formatTime, parseStored, prettyJson, preview, relative } from "./format.ts";
import { Problem, StatusBadge } from "./layout.tsx";
import { Table, type Column } from "./table.tsx";
import { FORKABLE_STATUSES } from "../../engine/repairs.ts";
import { buildTimeline, causeChain, type TimelineEntry, type TimelineSource } from "./timeline.ts";
import type { WhyReason } from "../../engine/why-view.ts";
import { WhyBanner } from "./why.tsx";

/** Rows of a list section shown on the page (timers, subscriptions, groups, compensations, runs). */
export const LIST_MAX = 100;
/** History entries per timeline page. */
export const TIMELINE_PAGE = 100;

export interface InstancePageProps {
  view: InstanceView & { children?: ChildSummary[] };
  /** One page of the timeline (payloads too large to show left out), after the row `historyAfter`. */
  history: TimelineSource[];
  historyAfter: number;
  historyNext: number | null;
  /** Compensation events of the current run (for each compensation's state). */
  compensationEvents: Pick<HistoryEvent, "activityId" | "eventType">[];
  timers: TimerRecord[];
  subscriptions: SubscriptionRecord[];
  /** Its per-wait webhook URLs (state only: the URL's token is not stored). */
  webhooks?: WaitWebhookRecord[];
  groups: GroupMembership[];
  compensations: CompensationRecord[];
  runs: ArchivedRunSummary[];
  /** The archived run being shown, with its history. */
  archived: { run: number; history: TimelineSource[] } | null;
  now: Date;
  /** Why it is not moving and what will move it (engine/why.ts): the banner at the top. */
  why?: WhyReason | null | undefined;
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

/** A value, bounded; when only part of it fits, a link to all of it as JSON. */
function Json({ value, raw }: { value: unknown; raw?: string | undefined }) {
  const shown = prettyJson(value);
  return (
    <>
      <pre>{shown.text}</pre>
      {shown.truncated && raw ? (
        <p class="small muted">
          Shown in part. <a href={raw}>Raw JSON</a>
        </p>
      ) : null}
    </>
  );
}

const rawUrl = (instanceId: string, part: string, run?: number) => `/ui/instances/${iid(instanceId)}/raw/${part}${run === undefined ? "" : `?run=${run}`}`;

/** The first `LIST_MAX` rows, and a line saying how many are left out. */
function capped<T>(rows: T[]): { rows: T[]; more: Child } {
  if (rows.length <= LIST_MAX) return { rows, more: null };
  return { rows: rows.slice(0, LIST_MAX), more: <p class="small muted">and {rows.length - LIST_MAX} more (not shown)</p> };
}

function ErrorChain({ chain }: { chain: SerializedError[] }) {
  return (
    <ol class="small">
      {chain.map((e, i) => (
        <li>
          {i > 0 ? <span class="muted">caused by </span> : null}
          <strong>{clip(String(e.name), 200)}</strong>: {clip(String(e.message))}
          {e.stack ? (
            <details>
              <summary class="muted">stack</summary>
              <pre>{clip(String(e.stack), 8000)}</pre>
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

/** Entries a fork can start from: the first entry of each activity id (compensations are not fork points). */
function forkPoints(entries: TimelineEntry[]): Set<TimelineEntry> {
  const seen = new Set<string>();
  const points = new Set<TimelineEntry>();
  for (const e of entries) {
    if (e.kind === "compensation" || e.kind === "compensation-failed" || !e.activityId || seen.has(e.activityId)) continue;
    seen.add(e.activityId);
    points.add(e);
  }
  return points;
}

/** `fork`: the fork action's URL when the instance can be forked (finished, parked or quarantined). */
function Timeline({ entries, now, raw, fork }: { entries: TimelineEntry[]; now?: Child; raw: (eventId: number) => string; fork?: string | undefined }) {
  const points = fork ? forkPoints(entries) : new Set<TimelineEntry>();
  return (
    <ol class="timeline">
      {entries.map((e) => (
        <li class={e.bad ? "bad" : ""} data-kind={e.kind}>
          <div class="small mono">{formatTime(e.at).slice(11)}</div>
          <div class="small muted" title="time since the previous entry">
            +{formatDuration(e.sinceMs)}
          </div>
          <div>
            <span class={`badge k-${e.kind}`}>{e.kind.replace("-", " ")}</span> <strong>{clip(e.name, 200)}</strong> <code class="muted">{clip(e.activityId, 300)}</code>
            {e.note ? <span class="small"> — {clip(e.note, 300)}</span> : null}
            {e.error ? (
              <div class="small">
                <strong>{clip(String(e.error.name), 200)}</strong>: {clip(String(e.error.message), 1000)}
              </div>
            ) : null}
            {e.oversized !== null ? (
              <div class="small">
                <a href={raw(e.eventId)}>Raw JSON</a>
              </div>
            ) : (
              <details>
                <summary class="small muted">{e.error ? "error record" : `recorded ${preview(e.detail, 80)}`}</summary>
                <Json value={e.error ?? e.detail} raw={raw(e.eventId)} />
              </details>
            )}
            {points.has(e) ? (
              <form method="post" action={fork} class="inline" data-action="fork">
                <input type="hidden" name="fromActivityId" value={e.activityId} />
                <button type="submit" class="small" title="a new instance that reuses the results before this activity and runs the rest again">
                  fork from here
                </button>
              </form>
            ) : null}
          </div>
        </li>
      ))}
      {now ?? null}
    </ol>
  );
}

function WaitingNow(p: { view: InstanceView; timers: TimerRecord[]; subscriptions: SubscriptionRecord[]; webhooks: WaitWebhookRecord[]; now: Date }) {
  const waits = p.subscriptions.filter((s) => s.activityId !== null);
  const items: Child[] = [];
  for (const h of p.webhooks.filter((w) => w.status === "open" && w.run === p.view.run).slice(0, LIST_MAX)) {
    // Its own wait, or a race's (beside a message branch the race is a message wait).
    const waiting = HOOK_LISTENING_STATUSES.includes(p.view.status as WaitStatus) && p.view.currentActivityId === (h.waitId ?? `${h.hookId}:wait`);
    items.push(
      <li>
        {waiting ? "a POST to its webhook URL" : "webhook URL open"} <span class="muted">(createWebhook at {h.hookId})</span>
        {h.expiresAt ? (
          <>
            {" "}
            — expires at <strong>{formatTime(h.expiresAt)}</strong> <span class="muted">({relative(h.expiresAt, p.now)})</span>
          </>
        ) : (
          " — no expiry"
        )}
      </li>,
    );
  }
  for (const t of p.timers.slice(0, LIST_MAX)) {
    const retry = /#retry(\d+)$/.exec(t.timerId);
    items.push(
      <li>
        {retry ? `retry backoff of ${t.timerId.replace(/#.*$/, "")}` : `timer ${t.timerId}`} due at <strong>{formatTime(t.expiresAt)}</strong>{" "}
        <span class="muted">({relative(t.expiresAt, p.now)})</span>
      </li>,
    );
  }
  for (const s of waits.slice(0, LIST_MAX)) {
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
        <span class="badge s-waiting">waiting</span>
        <ul class="small" id="waiting-now">
          {items}
        </ul>
      </div>
    </li>
  );
}

function compensationState(c: CompensationRecord, history: Pick<HistoryEvent, "activityId" | "eventType">[], status: string): string {
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

const compensationColumns = (history: Pick<HistoryEvent, "activityId" | "eventType">[], status: string): Column<CompensationRecord>[] => [
  { head: "compensation", cell: (c) => clip(c.activityName, 200) },
  { head: "registered at", cell: (c) => <code>{clip(c.activityId, 300)}</code> },
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
  const forkable = FORKABLE_STATUSES.includes(view.status) && p.archived === null;
  const error = view.error as StoredError | null;
  const waitingChannel = p.subscriptions.find((s) => s.activityId !== null)?.channel ?? "";
  const [compensations, subscriptions, groups, runs] = [capped(p.compensations), capped(p.subscriptions), capped(p.groups), capped(p.runs)];
  const archivedRun = p.archived?.run;
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
        {p.why ? <WhyBanner reason={p.why} now={p.now} /> : null}
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
              {view.rerunOf ? (
                <>
                  <dt>rerun of</dt>
                  <dd>
                    <a id="rerun-of" href={`/ui/instances/${iid(view.rerunOf)}`}>{view.rerunOf}</a>
                  </dd>
                </>
              ) : null}
              {view.forkOf ? (
                <>
                  <dt>forked from</dt>
                  <dd id="fork-of">
                    <a href={`/ui/instances/${iid(view.forkOf.instanceId)}`}>{view.forkOf.instanceId}</a> at <code>{view.forkOf.fromActivityId}</code>
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
            <Json value={view.input} raw={rawUrl(view.instanceId, "input")} />
            {view.status === "completed" ? (
              <>
                <h2>Output</h2>
                <div id="output">
                  <Json value={view.output} raw={rawUrl(view.instanceId, "output")} />
                </div>
              </>
            ) : null}
          </section>
        </div>
        {error ? (
          <section class="card" id="error">
            <h2>Error</h2>
            <ErrorChain chain={failureChain(error, timeline)} />
            <p class="small">
              <a href={rawUrl(view.instanceId, "error")}>Raw JSON</a>
            </p>
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
              <strong>{clip(view.failure.errorType, 200)}</strong>: {clip(view.failure.message)}
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
            <Json value={view.cancellation} raw={rawUrl(view.instanceId, "cancellation")} />
          </section>
        ) : null}
      </div>

      <section class="card" id="stream" data-stream={`/ui/instances/${iid(view.instanceId)}/stream`} hidden>
        <h2>
          Stream <span class="small muted" data-stream-state>connecting</span>
        </h2>
        <pre class="mono" />
      </section>

      <h2>
        Timeline{" "}
        <a class="small" href={`/ui/instances/${iid(view.instanceId)}/history.json`} download={`${view.instanceId}-history.json`} data-action="download-history">
          download JSON
        </a>
      </h2>
      <div class="card" data-live="timeline" id="timeline">
        {timeline.length === 0 && terminal ? <p class="muted">No history.</p> : null}
        {p.historyAfter > 0 ? (
          <p class="small pager">
            <a href={`/ui/instances/${iid(view.instanceId)}#timeline`}>← first entries</a>
          </p>
        ) : null}
        <Timeline entries={timeline} fork={forkable ? `/ui/instances/${iid(view.instanceId)}/fork` : undefined} raw={(eventId) => rawUrl(view.instanceId, `history/${eventId}`)} now={terminal || p.historyNext !== null ? null : <WaitingNow view={view} timers={p.timers} subscriptions={p.subscriptions} webhooks={p.webhooks ?? []} now={p.now} />} />
        {p.historyNext !== null ? (
          <p class="small pager">
            <a id="timeline-next" href={`/ui/instances/${iid(view.instanceId)}?after=${p.historyNext}#timeline`}>
              later entries →
            </a>
          </p>
        ) : null}
      </div>

      <div data-live="compensations">
        {p.compensations.length ? (
          <>
            <h2>Compensations</h2>
            <div class="card" id="compensations">
              <p class="small muted">Newest first: the order they run in.</p>
              <Table columns={compensationColumns(p.compensationEvents, view.status)} rows={compensations.rows} empty="None." />
              {compensations.more}
            </div>
          </>
        ) : null}
      </div>

      <div class="grid" data-live="links">
        <section class="card" id="subscriptions">
          <h2>Subscriptions</h2>
          <Table columns={SUBSCRIPTION_COLUMNS} rows={subscriptions.rows} empty="None." />
          {subscriptions.more}
          <h2>Groups</h2>
          {p.groups.length === 0 ? <p class="muted small">None.</p> : <ul>{groups.rows.map((g) => <li>{clip(g.group, 300)}</li>)}</ul>}
          {groups.more}
        </section>
        <section class="card" id="runs">
          <h2>Archived runs</h2>
          <Table columns={runColumns(view.instanceId)} rows={runs.rows} empty="None: this instance has not recurred." />
          {runs.more}
        </section>
      </div>

      {p.archived ? (
        <>
          <h2 id="archived">Run {p.archived.run} (archived)</h2>
          <div class="card">
            <Timeline entries={buildTimeline(p.archived.history, p.archived.history[0]?.createdAt ?? new Date(view.startedAt))} raw={(eventId) => rawUrl(view.instanceId, `history/${eventId}`, archivedRun)} />
          </div>
        </>
      ) : null}

      <div data-live="actions">
      {terminal ? (
        <>
          <h2>Actions</h2>
          <div class="actions">
            <form method="post" action={`/ui/instances/${iid(view.instanceId)}/rerun`} class="card" id="rerun-form">
              <p class="small muted">Rerun: a new instance of {view.workflowName} with the same input, linked to this one (which is unchanged).</p>
              <button type="submit">Rerun</button>
            </form>
          </div>
        </>
      ) : (
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
