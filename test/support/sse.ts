// A Server-Sent Events reader for tests: parses a response body into events
// as they arrive (comments counted as heartbeats), so a test can stop after n
// events and resume with Last-Event-ID.
export interface SseEvent {
  event: string;
  id?: string;
  data: string;
}

/** Events of an `text/event-stream` body, one at a time; `heartbeats` counts comment lines seen. */
export async function* sseEvents(body: ReadableStream<Uint8Array>, seen: { heartbeats: number } = { heartbeats: 0 }): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      for (let end = buf.indexOf("\n\n"); end >= 0; end = buf.indexOf("\n\n")) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const ev: SseEvent = { event: "message", data: "" };
        const data: string[] = [];
        let any = false;
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) {
            seen.heartbeats++;
            continue;
          }
          const i = line.indexOf(":");
          const field = i < 0 ? line : line.slice(0, i);
          const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
          any = true;
          if (field === "event") ev.event = v;
          else if (field === "id") ev.id = v;
          else if (field === "data") data.push(v);
        }
        if (!any) continue;
        ev.data = data.join("\n");
        yield ev;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** Every event until the stream ends (or `stopAfter` events). */
export async function readSse(body: ReadableStream<Uint8Array>, stopAfter = Infinity): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const ev of sseEvents(body)) {
    out.push(ev);
    if (out.length >= stopAfter) break;
  }
  return out;
}
