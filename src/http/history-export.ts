/**
 * The whole history of an instance's current run as one streamed response:
 * NDJSON (one history entry a line, `GET /instances/:id/history?format=ndjson`)
 * or a JSON array (the viewer's "download JSON"). The body is pulled page by
 * page from the engine (engine.historyPages), so memory stays one page
 * however long the history is, and a client that stops reading stops the
 * queries. The streaming outlives the handler, so it is registered as the
 * request's background work: a per-request database (Workers) stays open
 * until the last page is read.
 */
import type { Context } from "hono";
import type { DispatchScope } from "../engine/dispatcher.ts";
import type { Engine } from "../engine/engine.ts";
import { logError } from "../core/log.ts";

export type HistoryFormat = "ndjson" | "json";

export function historyExport(c: Context, e: Engine, instanceId: string, format: HistoryFormat, scope: DispatchScope | undefined, headers: Record<string, string> = {}): Response {
  const pages = e.historyPages(instanceId);
  const enc = new TextEncoder();
  let finish: () => void = () => {};
  scope?.waitUntil?.(new Promise<void>((resolve) => (finish = resolve)));
  let first = true;
  const body = new ReadableStream<Uint8Array>({
    async pull(ctl) {
      try {
        const next = await pages.next();
        if (next.done) {
          if (format === "json") ctl.enqueue(enc.encode(first ? "[]\n" : "\n]\n"));
          ctl.close();
          finish();
          return;
        }
        const lines = next.value.map((entry) => JSON.stringify(entry));
        const chunk = format === "ndjson" ? lines.join("\n") + "\n" : (first ? "[\n" : ",\n") + lines.join(",\n");
        first = false;
        ctl.enqueue(enc.encode(chunk));
      } catch (err) {
        logError("edda: history export failed", err);
        ctl.error(err);
        finish();
      }
    },
    async cancel() {
      finish();
      await pages.return(undefined);
    },
  });
  c.header("cache-control", "no-store");
  return c.body(body, 200, { "content-type": format === "ndjson" ? "application/x-ndjson" : "application/json", ...headers });
}
