/** @jsxImportSource hono/jsx */
/**
 * Channels: each channel's mode(s), subscribers, waiting receivers and
 * pending messages; a channel's page lists its subscribers with what each
 * could take now, and its pending messages; both can publish.
 */
import type { ChannelMessageRecord, ChannelSubscriber, ChannelSummary } from "../../storage/types.ts";
import { formatTime, parseStored, preview, relative } from "./format.ts";
import { Problem, StatusBadge } from "./layout.tsx";

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
        <table>
          <thead>
            <tr>
              <th>channel</th>
              <th>mode</th>
              <th>subscribers</th>
              <th>waiting</th>
              <th>pending</th>
              <th>messages</th>
              <th>last publish</th>
            </tr>
          </thead>
          <tbody>
            {p.channels.length === 0 ? (
              <tr>
                <td colspan={7} class="muted">
                  No channels yet: they appear with their first subscriber or message.
                </td>
              </tr>
            ) : (
              p.channels.map((c) => (
                <tr>
                  <td class="id">
                    <a href={`/ui/channels/${cid(c.channel)}`}>{c.channel}</a>
                  </td>
                  <td>{c.modes.length ? c.modes.join(", ") : <span class="muted">—</span>}</td>
                  <td>{c.subscribers}</td>
                  <td>{c.waiting}</td>
                  <td>{c.pending}</td>
                  <td>{c.messages}</td>
                  <td class="small muted">{c.lastPublishedAt ? relative(c.lastPublishedAt, p.now) : "—"}</td>
                </tr>
              ))
            )}
          </tbody>
        </table>
        <p class="small muted">
          Pending: point-to-point messages not yet received, broadcast messages some subscriber has not taken yet, queue messages nobody claimed.
        </p>
      </div>
      <h2>Publish</h2>
      <PublishForm values={p.values} />
    </>
  );
}

function Message({ m }: { m: ChannelMessageRecord }) {
  const data = m.data.type === "binary" ? m.data.bytes : parseStored(m.data.json);
  return (
    <tr>
      <td class="small">{formatTime(m.publishedAt)}</td>
      <td class="mono small">{preview(data, 160)}</td>
      <td class="small">{m.targetInstanceId ? <a href={`/ui/instances/${cid(m.targetInstanceId)}`}>{m.targetInstanceId}</a> : <span class="muted">any</span>}</td>
    </tr>
  );
}

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
          {p.subscribers.length === 0 ? (
            <p class="muted">No subscribers.</p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th>instance</th>
                  <th>mode</th>
                  <th>status</th>
                  <th>waiting</th>
                  <th>can take now</th>
                </tr>
              </thead>
              <tbody>
                {p.subscribers.map((s) => (
                  <tr>
                    <td class="id">
                      <a href={`/ui/instances/${cid(s.instanceId)}`}>{s.instanceId}</a> <span class="muted small">{s.workflowName}</span>
                    </td>
                    <td>{s.mode}</td>
                    <td>
                      <StatusBadge status={s.status} />
                    </td>
                    <td class="small">
                      {s.activityId ? (
                        <>
                          {s.activityId}
                          {s.timeoutAt ? <span class="muted"> (timeout {relative(s.timeoutAt, p.now)})</span> : null}
                        </>
                      ) : (
                        <span class="muted">no</span>
                      )}
                    </td>
                    <td>{s.available}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
        <h2>Pending messages</h2>
        <div class="card">
          {p.pending.length === 0 ? (
            <p class="muted">None.</p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th>published (UTC)</th>
                  <th>data</th>
                  <th>for</th>
                </tr>
              </thead>
              <tbody>
                {p.pending.map((m) => (
                  <Message m={m} />
                ))}
              </tbody>
            </table>
          )}
        </div>
      </div>
      <h2>Publish</h2>
      <PublishForm channel={p.channel} />
    </>
  );
}
