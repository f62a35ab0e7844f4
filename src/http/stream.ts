/**
 * `GET /instances/:id/stream`: an instance's realtime stream as Server-Sent
 * Events (engine/stream-reader.ts reads it).
 *
 *   event: chunk | emit | retry      id: the item's sequence number
 *   data: {"seq","kind","source","attempt","topic","data"} (binary items:
 *         "data" is base64 and "encoding":"base64")
 *   event: end                       data: {"status","lastSeq"} — the instance finished:
 *                                    status is its final status, lastSeq the seq of the
 *                                    stream's last item (0: the stream is empty), whatever
 *                                    the reader resumed from or filtered: resuming after it
 *                                    yields nothing
 *   : heartbeat                      a comment every 15 s while nothing happens
 *
 * `Last-Event-ID` (or `?after=`) resumes after that sequence number: nothing
 * missed, nothing twice. `?topic=a,b` keeps those topics (and the retry
 * markers). A response ends without `end` when its time bound passes (bounded
 * on Workers): EventSource reconnects with Last-Event-ID by itself.
 */
import type { Context, Hono } from "hono";
import { streamSSE } from "hono/streaming";
import * as z from "zod";
import { InvalidArgumentError } from "../core/errors.ts";
import { toBase64 } from "../core/serialization.ts";
import type { DispatchScope } from "../engine/dispatcher.ts";
import type { Engine } from "../engine/engine.ts";
import type { StreamEvent } from "../engine/stream-reader.ts";
import type { StreamItem } from "../engine/records.ts";
import { documented } from "./openapi.ts";
import { instanceNotFound, problem } from "./problem.ts";
import type { RouteHelpers } from "./routes.ts";
import type { StreamGate } from "./stream-gate.ts";

const seqText = z.string().regex(/^\d{1,15}$/, "a sequence number");

/** The SSE `data` of an item: the stored JSON text goes out verbatim (it is already JSON, one line). */
export function itemData(item: StreamItem): string {
  const head = `{"seq":${item.seq},"kind":"${item.kind}","source":${JSON.stringify(item.source)},"attempt":${item.attempt},"topic":${JSON.stringify(item.topic)}`;
  if (item.data.type === "binary") return `${head},"encoding":"base64","data":"${toBase64(item.data.bytes)}"}`;
  return `${head},"data":${item.data.json}}`;
}

/**
 * The SSE response of an instance's stream (the API route and the viewer's share it); 404 when unknown.
 * The streaming outlives the handler, so it is the request's background work (`scope.waitUntil`): a
 * database opened for this request (Workers) stays open until the response ends.
 */
export async function streamResponse(c: Context, e: Engine, instanceId: string, after: number, scope: DispatchScope | undefined, topics?: string[], gate?: StreamGate): Promise<Response> {
  const release = gate ? gate.take() : () => {};
  if (!release) return problem(c, 503, `too many open streams (${gate!.max} in this process); reconnect later`, "ServiceUnavailable", {}, { "retry-after": "5" });
  const abort = new AbortController();
  let events;
  try {
    events = await e.openStream(instanceId, { after, ...(topics?.length ? { topics } : {}), signal: abort.signal });
  } catch (err) {
    release();
    throw err;
  }
  if (!events) {
    release();
    return instanceNotFound(c, instanceId);
  }
  c.header("cache-control", "no-cache");
  c.header("x-accel-buffering", "no");
  let finish: () => void = () => {};
  scope?.waitUntil?.(new Promise<void>((resolve) => (finish = resolve)));
  return streamSSE(c, async (sse) => {
    sse.onAbort(() => abort.abort());
    try {
      for await (const ev of events as AsyncGenerator<StreamEvent>) {
        if (ev.type === "heartbeat") await sse.write(": heartbeat\n\n");
        else if (ev.type === "end") await sse.writeSSE({ event: "end", data: JSON.stringify({ status: ev.status, lastSeq: ev.lastSeq }) });
        else await sse.writeSSE({ event: ev.item.kind, id: String(ev.item.seq), data: itemData(ev.item) });
      }
    } finally {
      release();
      finish();
    }
  });
}

/** `Last-Event-ID` as a sequence number (0 when absent); a malformed one is a 400. */
export function lastEventId(c: Context): number | null {
  const raw = c.req.header("last-event-id");
  if (raw === undefined || raw === "") return null;
  const r = seqText.safeParse(raw.trim());
  if (!r.success) throw new InvalidArgumentError("Last-Event-ID must be a sequence number", r.error.issues);
  return Number(r.data);
}

export function streamRoutes(api: Hono, h: RouteHelpers): void {
  api.get(
    "/instances/:id/stream",
    documented({
      operationId: "instanceStream",
      summary: "An instance's realtime stream (Server-Sent Events)",
      description:
        "Items the workflow emitted (`emit`) and its activities streamed (`ctx.stream`), in order, each with its sequence number as the event id; then an `end` event with the instance's final status. Resume with `Last-Event-ID` (or `after`). Items of a failed attempt stay; a `retry` event precedes the next attempt's items. Heartbeat comments every 15 s.",
      tags: ["instances"],
      auth: "api",
      params: z.object({ id: z.string() }),
      query: z.object({
        after: seqText.optional().describe("resume after this sequence number (as Last-Event-ID)"),
        topic: z.string().max(2048).optional().describe("comma-separated topics to keep (retry markers always come)"),
      }),
      responses: {
        200: { description: "the event stream", contentType: "text/event-stream" },
        400: { description: "a malformed Last-Event-ID or query" },
        404: { description: "unknown instance" },
      },
    }),
    async (c) => {
      const { params, query } = c.var.valid;
      const after = lastEventId(c) ?? Number(query.after ?? 0);
      const topics = query.topic?.split(",").map((t) => t.trim()).filter((t) => t.length > 0);
      for (const t of topics ?? []) if (t.length > 255 || t.includes("\u0000")) throw new InvalidArgumentError("a topic is 1–255 characters without NUL", [{ path: ["topic"], message: "invalid topic" }]);
      return streamResponse(c, await h.engine(c), params.id, after, h.scope(c), topics, h.streams);
    },
  );
}
