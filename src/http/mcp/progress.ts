/**
 * `tasks/result`: the outcome of a workflow task, once its instance has
 * finished — and, when the request carries a `progressToken`, the instance's
 * realtime stream on the way there, one `notifications/progress` per item
 * (`progress` counts the items sent, `message` is the item's text, `_meta`
 * carries the item as `GET /instances/:id/stream` has it), then the result.
 *
 * The stream is read from its start: the endpoint is stateless and a request
 * does not say what an earlier one delivered, so every `tasks/result` with a
 * token replays the whole stream in order. A client following the SDK's
 * `callToolStream` asks `tasks/get` until the task is terminal, then
 * `tasks/result`: it gets every item at once, then the result. A client that
 * calls `tasks/result` right after creating the task gets them live.
 *
 * Waiting. Where readers are woken by LISTEN (Node, Deno on Postgres,
 * PGlite) the stream read is the wait. Where they poll (Workers: a database
 * per request), the live part is one bounded stream read, as for SSE
 * readers (25 s, POLL_RESPONSE_MAX_MS); if the instance is still running
 * after it, the request waits as a plain `tasks/result` does — one status
 * read per poll interval (1 s running, 5 s sleeping, 30 s waiting for a
 * message), no CPU in between — and sends the rest of the stream once the
 * instance has finished. See docs/design.md (MCP).
 */
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { ErrorCode, McpError, RELATED_TASK_META_KEY, type ProgressToken, type Result, type ServerNotification, type ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import type { StreamItem } from "../../engine/records.ts";
import { itemData } from "../stream.ts";
import type { InstanceTaskStore } from "./tasks.ts";
import type { McpCallContext } from "./tool-kit.ts";

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** The `_meta` key of a progress notification's stream item. */
export const STREAM_ITEM_META_KEY = "edda-edge/stream-item";

export async function taskResult(ctx: McpCallContext, store: InstanceTaskStore, taskId: string, extra: Extra): Promise<Result> {
  const token = extra._meta?.progressToken;
  if (!(await store.getTask(taskId))) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
  if (token !== undefined) await forwardStream(ctx, store, taskId, token, extra);
  else await waitFinished(store, taskId, extra.signal);
  const result = await store.getTaskResult(taskId);
  return { ...result, _meta: { ...result._meta, [RELATED_TASK_META_KEY]: { taskId } } };
}

/** The stream's items as progress notifications until its end event (the instance finished). */
async function forwardStream(ctx: McpCallContext, store: InstanceTaskStore, taskId: string, token: ProgressToken, extra: Extra): Promise<void> {
  const live = (await ctx.engine.streamHub?.live()) ?? false;
  let after = 0;
  let progress = 0;
  for (;;) {
    const events = await ctx.engine.openStream(taskId, { after, signal: extra.signal });
    if (!events) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
    for await (const ev of events) {
      if (ev.type === "end") return;
      if (ev.type !== "item") continue;
      after = ev.item.seq;
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress: ++progress, message: progressMessage(ev.item), _meta: { [STREAM_ITEM_META_KEY]: JSON.parse(itemData(ev.item)) as unknown } },
      });
    }
    cancelled(extra.signal);
    // The read's time bound passed without the end: live, read on; polled (Workers), wait without reading first.
    if (!live) await waitFinished(store, taskId, extra.signal);
  }
}

/** A stream item as a progress message: text as it is, other JSON as JSON, bytes by their size. */
export function progressMessage(item: StreamItem): string {
  if (item.data.type === "binary") return `${item.data.bytes.byteLength} bytes`;
  const value = JSON.parse(item.data.json) as unknown;
  if (item.kind === "retry") {
    const { activityId, attempt } = value as { activityId: string; attempt: number };
    return `retry: ${activityId} attempt ${attempt} starts over`;
  }
  return typeof value === "string" ? value : item.data.json;
}

/** Until the task is terminal, re-reading it at its poll interval (what the SDK's own tasks/result does). */
async function waitFinished(store: InstanceTaskStore, taskId: string, signal: AbortSignal): Promise<void> {
  for (;;) {
    const task = await store.getTask(taskId);
    if (!task) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
    if (task.status !== "working" && task.status !== "input_required") return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(done, task.pollInterval ?? 1000);
      signal.addEventListener("abort", done, { once: true });
      function done() {
        clearTimeout(t);
        signal.removeEventListener("abort", done);
        resolve();
      }
    });
    cancelled(signal);
  }
}

function cancelled(signal: AbortSignal): void {
  if (signal.aborted) throw new McpError(ErrorCode.InvalidRequest, "Request cancelled");
}
