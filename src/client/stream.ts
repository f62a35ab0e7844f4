/**
 * The client's side of `GET /instances/:id/stream`: an async iterator over
 * the instance's stream that reconnects and resumes by itself.
 *
 * Each response is read as Server-Sent Events; the last sequence number seen
 * goes out as `Last-Event-ID` on the next connection, so a dropped connection,
 * a proxy timeout or the server's own time bound (Workers answer at most
 * 25 s) costs nothing: no item is missed and none comes twice. The iterator
 * ends after the `end` event (the instance finished); it gives up with the
 * last error only after RECONNECT_TRIES connections in a row brought nothing.
 */
import type { InstanceStatus } from "../core/model.ts";

export type StreamEventKind = "chunk" | "emit" | "retry";

export interface StreamItemEvent {
  kind: StreamEventKind;
  seq: number;
  /** The activity id (chunks, retry markers) or the emit's operation id. */
  source: string;
  attempt: number;
  topic: string | null;
  /** The item: JSON as written, or base64 text when `encoding` is `base64` (bytes). */
  data: unknown;
  encoding?: "base64";
}

export interface StreamEndEvent {
  kind: "end";
  status: InstanceStatus;
  lastSeq: number;
}

export type StreamEvent = StreamItemEvent | StreamEndEvent;

export interface StreamOptions {
  /** Resume after this sequence number (default: from the start). */
  after?: number;
  /** Keep only these topics (retry markers always come). */
  topics?: string[];
  signal?: AbortSignal;
}

export const RECONNECT_TRIES = 6;
const BACKOFF_MS = [100, 250, 500, 1000, 2000, 4000];

export interface StreamTransport {
  /** GET `path` with these headers; a non-2xx answer throws (the client's EddaApiError). */
  open(path: string, headers: Record<string, string>, signal?: AbortSignal): Promise<ReadableStream<Uint8Array>>;
  /** Whether an error is the app's answer (no retry) rather than no answer. */
  isAnswer(err: unknown): boolean;
}

export async function* streamEvents(transport: StreamTransport, instanceId: string, o: StreamOptions = {}): AsyncGenerator<StreamEvent, void, undefined> {
  let last = o.after ?? 0;
  let idle = 0;
  const query = o.topics?.length ? `?topic=${encodeURIComponent(o.topics.join(","))}` : "";
  for (;;) {
    let progressed = false;
    try {
      const body = await transport.open(`/instances/${encodeURIComponent(instanceId)}/stream${query}`, { accept: "text/event-stream", ...(last > 0 ? { "last-event-id": String(last) } : {}) }, o.signal);
      for await (const ev of sse(body)) {
        progressed = true;
        if (ev.event === "end") {
          yield { kind: "end", ...(JSON.parse(ev.data) as { status: InstanceStatus; lastSeq: number }) };
          return;
        }
        const item = JSON.parse(ev.data) as StreamItemEvent;
        last = item.seq;
        yield item;
      }
    } catch (err) {
      if (o.signal?.aborted || transport.isAnswer(err)) throw err;
      if (idle + 1 >= RECONNECT_TRIES && !progressed) throw err;
    }
    idle = progressed ? 0 : idle + 1;
    if (idle >= RECONNECT_TRIES) throw new Error(`the stream of ${instanceId} ended ${RECONNECT_TRIES} times without an event`);
    if (o.signal?.aborted) return;
    await new Promise((r) => setTimeout(r, progressed ? 0 : BACKOFF_MS[Math.min(idle, BACKOFF_MS.length - 1)]));
  }
}

interface RawEvent {
  event: string;
  data: string;
}

/** Server-Sent Events of a body (comments skipped), as the EventSource spec parses them. */
async function* sse(body: ReadableStream<Uint8Array>): AsyncGenerator<RawEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      for (let end = buf.indexOf("\n\n"); end >= 0; end = buf.indexOf("\n\n")) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        let event = "message";
        const data: string[] = [];
        for (const line of block.split("\n")) {
          if (line === "" || line.startsWith(":")) continue;
          const i = line.indexOf(":");
          const field = i < 0 ? line : line.slice(0, i);
          const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
          if (field === "event") event = v;
          else if (field === "data") data.push(v);
        }
        if (data.length) yield { event, data: data.join("\n") };
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
