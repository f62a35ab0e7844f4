// The client's stream iterator (client/stream.ts) over a transport the test
// scripts — no app, no database: Server-Sent Events parsed as EventSource
// does (CRLF, comments, multi-line data, events split across chunks), a
// dropped connection resumed with Last-Event-ID so nothing is missed or
// repeated, the iterator ending at `end`, an answer from the app (404)
// thrown at once, and RECONNECT_TRIES empty connections in a row giving up.
// The same against a live app on Postgres and under a cutting proxy:
// test/http/stream.test.ts, test/client/stream.browser.test.ts.
import { describe, expect, it } from "vitest";
import { RECONNECT_TRIES, streamEvents, type StreamEvent, type StreamTransport } from "../../src/client/stream.ts";

class Answer extends Error {}
const item = (seq: number, data: unknown) => `event: emit\nid: ${seq}\ndata: ${JSON.stringify({ seq, kind: "emit", source: `emit:${seq}`, attempt: 1, topic: null, data })}\n\n`;
const end = (lastSeq: number) => `event: end\ndata: ${JSON.stringify({ status: "completed", lastSeq })}\n\n`;
const body = (...chunks: string[]) =>
  new ReadableStream<Uint8Array>({
    start(ctl) {
      for (const c of chunks) ctl.enqueue(new TextEncoder().encode(c));
      ctl.close();
    },
  });

function scripted(connections: (() => ReadableStream<Uint8Array>)[]) {
  const opened: { path: string; headers: Record<string, string> }[] = [];
  const transport: StreamTransport = {
    open: async (path, headers) => {
      opened.push({ path, headers });
      const next = connections.shift();
      if (!next) throw new Error("no more connections");
      return next();
    },
    isAnswer: (err) => err instanceof Answer,
  };
  return { transport, opened };
}
const collect = async (it: AsyncGenerator<StreamEvent>) => {
  const out: StreamEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
};

describe("the client's stream", () => {
  it("parses SSE as EventSource does: CRLF, comments, multi-line data, an event split across chunks", async () => {
    const first = item(1, "a");
    const { transport } = scripted([() => body(": heartbeat\r\n\r\n", first.slice(0, 17), first.slice(17), "event: emit\ndata: {\"seq\":2,\"kind\":\"emit\",\"source\":\"e\",\ndata: \"attempt\":1,\"topic\":\"t\",\"data\":[1]}\n\n", end(2))]);
    const events = await collect(streamEvents(transport, "i 1"));
    expect(events.map((e) => (e.kind === "end" ? "end" : e.data))).toEqual(["a", [1], "end"]);
    expect(events[1]).toMatchObject({ seq: 2, topic: "t" });
  });

  it("a dropped connection resumes after the last item seen: nothing missed, nothing twice", async () => {
    const { transport, opened } = scripted([() => body(item(1, "a"), item(2, "b")), () => body(item(3, "c")), () => body(end(3))]);
    const events = await collect(streamEvents(transport, "i/1", { topics: ["x", "y"] }));
    expect(events.map((e) => (e.kind === "end" ? `end:${e.lastSeq}` : e.seq))).toEqual([1, 2, 3, "end:3"]);
    expect(opened.map((o) => o.headers["last-event-id"])).toEqual([undefined, "2", "3"]);
    expect(opened[0]!.path).toBe("/instances/i%2F1/stream?topic=x%2Cy");
    expect(opened[0]!.headers.accept).toBe("text/event-stream");
  });

  it("starts after a given sequence number; an answer from the app is thrown at once", async () => {
    const { transport, opened } = scripted([() => body(end(9))]);
    expect(await collect(streamEvents(transport, "i", { after: 7 }))).toEqual([{ kind: "end", status: "completed", lastSeq: 9 }]);
    expect(opened[0]!.headers["last-event-id"]).toBe("7");
    const refused: StreamTransport = { open: async () => Promise.reject(new Answer("404")), isAnswer: (e) => e instanceof Answer };
    await expect(collect(streamEvents(refused, "nobody"))).rejects.toBeInstanceOf(Answer);
  });

  it(`gives up after ${RECONNECT_TRIES} connections in a row that brought nothing`, { timeout: 20_000 }, async () => {
    const { transport, opened } = scripted(Array.from({ length: RECONNECT_TRIES + 2 }, () => () => body(": only a heartbeat\n\n")));
    await expect(collect(streamEvents(transport, "stuck"))).rejects.toThrow(`ended ${RECONNECT_TRIES} times without an event`);
    expect(opened).toHaveLength(RECONNECT_TRIES);
  });
});
