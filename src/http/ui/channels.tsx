/** @jsxImportSource hono/jsx */
/**
 * Channels: each channel's mode(s), subscribers, waiting receivers and
 * pending messages; a channel's page lists its subscribers with what each
 * could take now, and its pending messages; both can publish.
 */
import type { ChannelMessageRecord, ChannelSubscriber, ChannelSummary } from "../../engine/records.ts";
import { formatTime, parseStored, preview, relative } from "./format.ts";
import { Problem, StatusBadge } from "./layout.tsx";
import { Table, type Column } from "./table.tsx";

const cid = (c: string) => encodeURIComponent(c);

/** A channel + JSON data form: publishing to a channel, or sending to one instance. */
export function MessageForm(p: { action: string; id: string; button: string; channel: string; data?: string | undefined }) {
  return (
    <form method="post" action={p.action} class="card form-grid" id={p.id}>
      <label>
        channel
        <input name="channel" required maxlength={255} value={p.channel} />
      </label>
      <label>
        data (JSON)
        <textarea name="data" rows={3}>
          {p.data ?? ""}
        </textarea>
      </label>
      <div>
        <button type="submit">{p.button}</button>
      </div>
    </form>
  );
}

function PublishForm(p: { channel?: string; values?: { channel: string; data: string } | undefined }) {
  return <MessageForm action="/ui/channels/publish" id="publish-form" button="Publish" channel={p.values?.channel ?? p.channel ?? ""} data={p.values?.data} />;
}

export function ChannelsPage(p: { channels: ChannelSummary[]; now: Date; notice?: string | undefined; problem?: string | undefined; values?: { channel: string; data: string } | undefined }) {
  return (
    <>
      <h1>Channels</h1>
      {p.notice ? <div class="notice">{p.notice}</div> : null}
      {p.problem ? <Problem message={p.problem} /> : null}
      <div class="card" data-live="channels">
        <Table columns={CHANNEL_COLUMNS(p.now)} rows={p.channels} empty="No channels yet: they appear with their first subscriber or message." />
        <p class="small muted">
          Pending: point-to-point messages not yet received, broadcast messages some subscriber has not taken yet, queue messages nobody claimed.
        </p>
      </div>
      <h2>Publish</h2>
      <PublishForm values={p.values} />
    </>
  );
}

const CHANNEL_COLUMNS = (now: Date): Column<ChannelSummary>[] => [
  { head: "channel", class: "id", cell: (c) => <a href={`/ui/channels/${cid(c.channel)}`}>{c.channel}</a> },
  { head: "mode", cell: (c) => (c.modes.length ? c.modes.join(", ") : <span class="muted">—</span>) },
  { head: "subscribers", cell: (c) => c.subscribers },
  { head: "waiting", cell: (c) => c.waiting },
  { head: "pending", cell: (c) => c.pending },
  { head: "messages", cell: (c) => c.messages },
  { head: "last publish", class: "small muted", cell: (c) => (c.lastPublishedAt ? relative(c.lastPublishedAt, now) : "—") },
];

const SUBSCRIBER_COLUMNS = (now: Date): Column<ChannelSubscriber>[] => [
  {
    head: "instance",
    class: "id",
    cell: (s) => (
      <>
        <a href={`/ui/instances/${cid(s.instanceId)}`}>{s.instanceId}</a> <span class="muted small">{s.workflowName}</span>
      </>
    ),
  },
  { head: "mode", cell: (s) => s.mode },
  { head: "status", cell: (s) => <StatusBadge status={s.status} /> },
  {
    head: "waiting",
    class: "small",
    cell: (s) =>
      s.activityId ? (
        <>
          {s.activityId}
          {s.timeoutAt ? <span class="muted"> (timeout {relative(s.timeoutAt, now)})</span> : null}
        </>
      ) : (
        <span class="muted">no</span>
      ),
  },
  { head: "can take now", cell: (s) => s.available },
];

const MESSAGE_COLUMNS: Column<ChannelMessageRecord>[] = [
  { head: "published (UTC)", class: "small", cell: (m) => formatTime(m.publishedAt) },
  { head: "data", class: "mono small", cell: (m) => preview(m.data.type === "binary" ? m.data.bytes : parseStored(m.data.json), 160) },
  { head: "for", class: "small", cell: (m) => (m.targetInstanceId ? <a href={`/ui/instances/${cid(m.targetInstanceId)}`}>{m.targetInstanceId}</a> : <span class="muted">any</span>) },
];

export function ChannelPage(p: { channel: string; subscribers: ChannelSubscriber[]; pending: ChannelMessageRecord[]; now: Date }) {
  return (
    <>
      <p class="small">
        <a href="/ui/channels">← channels</a>
      </p>
      <h1>{p.channel}</h1>
      <div data-live="channel">
        <h2>Subscribers</h2>
        <div class="card">
          <Table columns={SUBSCRIBER_COLUMNS(p.now)} rows={p.subscribers} empty="No subscribers." />
        </div>
        <h2>Pending messages</h2>
        <div class="card">
          <Table columns={MESSAGE_COLUMNS} rows={p.pending} empty="None." />
        </div>
      </div>
      <h2>Publish</h2>
      <PublishForm channel={p.channel} />
    </>
  );
}
