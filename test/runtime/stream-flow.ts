// The realtime-stream flow every runtime runs (workerd, Deno): a summarize
// instance started over HTTP, read back with the typed client's iterator over
// the runtime's own SSE route (which reconnects with Last-Event-ID when a
// bounded response ends): every token once and in order, the workflow's
// emit, then the end status.
import { expect } from "vitest";
import { createClient, type StreamEvent } from "../../src/client/index.ts";
import { summaryToken } from "../../functions/workflows/summarize.ts";

export async function summarizeStreamFlow(base: string, instanceId: string): Promise<void> {
  const client = createClient({ baseUrl: base });
  await client.start("summarize", { tokens: 60 }, { instanceId });
  const got: StreamEvent[] = [];
  for await (const ev of client.stream(instanceId)) got.push(ev);
  const items = got.flatMap((e) => (e.kind === "end" ? [] : [e]));
  expect(items.map((e) => e.data)).toEqual([...Array.from({ length: 60 }, (_, i) => summaryToken(i)), "done"]);
  expect(new Set(items.map((e) => e.seq)).size).toBe(items.length);
  expect(items.slice(0, 60).every((e) => e.kind === "chunk" && e.attempt === 1 && e.topic === "tokens")).toBe(true);
  expect(got.at(-1)).toEqual({ kind: "end", status: "completed", lastSeq: items.at(-1)!.seq });
}
