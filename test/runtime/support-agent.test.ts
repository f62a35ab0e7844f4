// The support_agent example (functions/workflows/support-agent.ts) as
// `npm start` serves it (functions/node.ts, a real Node process on real
// Postgres), against a local scripted OpenAI-compatible server (streamed
// Chat Completions, no network, no real model): asked to refund o-42 it looks
// the order up, asks for the refund and waits for approval (`why`: message);
// the Edda server is killed with SIGKILL while it waits and a new one started
// on the same database; the approval sent to the new one lets the refund run
// and the agent answers with the model's final text — and the model server
// saw exactly 3 completions. The stream read before the kill resumes on the
// new server from its Last-Event-ID with the final answer's tokens.
import { afterAll, beforeAll, expect, it } from "vitest";
import { startChatCompletionsServer, type ChatCompletionsServer } from "../support/chat-completions-server.ts";
import { freshDatabase } from "../support/db.ts";
import { freePort } from "../support/postgres-cluster.ts";
import { sseEvents, type SseEvent } from "../support/sse.ts";
import { api, spawnServer, waitForStatus, type Server } from "./processes.ts";

const FINAL = "Your order o-42 has been refunded: 59.9 EUR. Approved by alice.";
let model: ChatCompletionsServer;
let databaseUrl: string;
let server: Server | undefined;

async function startEdda(): Promise<Server> {
  const port = await freePort();
  return spawnServer({
    command: process.execPath,
    args: ["--import", "tsx", "functions/node.ts"],
    port,
    env: { PORT: String(port), DATABASE_URL: databaseUrl, EDDA_AI_BASE_URL: model.baseUrl, EDDA_AI_MODEL: "scripted-model", EDDA_AI_API_KEY: "test-key", EDDA_METRICS: "off", EDDA_SWEEP_INTERVAL_MS: "500" },
  });
}

beforeAll(async () => {
  model = await startChatCompletionsServer([
    { text: "Let me look that order up.", toolCalls: [{ name: "lookup_order", arguments: { orderId: "o-42" } }] },
    { toolCalls: [{ name: "refund", arguments: { orderId: "o-42", reason: "customer asked" } }] },
    { text: FINAL },
  ]);
  databaseUrl = await freshDatabase("support_agent");
  server = await startEdda();
}, 90_000);
afterAll(async () => {
  await server?.stop();
  await model?.close();
});

/** SSE events of the instance's stream until `until` says stop (or the stream ends). */
async function readStream(base: string, id: string, until: (ev: SseEvent) => boolean, lastEventId?: string): Promise<SseEvent[]> {
  const res = await fetch(`${base}/instances/${id}/stream`, { headers: lastEventId ? { "last-event-id": lastEventId } : {} });
  expect(res.status).toBe(200);
  const out: SseEvent[] = [];
  for await (const ev of sseEvents(res.body!)) {
    out.push(ev);
    if (until(ev) || ev.event === "end") break;
  }
  await res.body!.cancel().catch(() => undefined);
  return out;
}

const item = (ev: SseEvent) => JSON.parse(ev.data) as { seq: number; topic: string | null; data: unknown };

it("refund o-42: waits for approval (why: message), survives a SIGKILL of the server while it waits, completes after the approval with the model's answer; 3 completions in all", { timeout: 90_000 }, async () => {
  const started = await api<{ instanceId: string }>(server!.url, "POST", "/workflows/support_agent/instances", { input: { question: "Please refund my order o-42." }, instanceId: "sa-1" });
  expect(started.status).toBe(201);
  await waitForStatus(server!.url, "sa-1", ["waiting_for_message"], 30_000);
  const why = await api<{ reason: { kind: string } }>(server!.url, "GET", "/instances/sa-1/why");
  expect(why.body.reason.kind).toBe("message");
  expect(model.requests).toHaveLength(2);
  expect(model.requests.every((r) => r.stream === true && r.model === "scripted-model")).toBe(true);

  // A reader sees the first answer's tokens, then the approval request.
  const before = await readStream(server!.url, "sa-1", (ev) => ev.event === "emit" && (item(ev).data as { type?: string }).type === "approval-requested");
  const tokensBefore = before.filter((e) => e.event === "chunk" && item(e).topic === "tokens").map((e) => item(e).data as string);
  expect(tokensBefore.join("")).toBe("Let me look that order up.");
  expect(item(before.at(-1)!).data).toMatchObject({ type: "approval-requested", toolName: "refund", input: { orderId: "o-42" }, channel: "approval" });
  const lastId = before.at(-1)!.id!;

  await server!.stop("SIGKILL");
  server = await startEdda();
  expect((await api<{ status: string }>(server.url, "GET", "/instances/sa-1")).body.status).toBe("waiting_for_message");
  expect(model.requests).toHaveLength(2);

  const sent = await api(server.url, "POST", "/instances/sa-1/messages", { channel: "approval", data: { approved: true, approver: "alice" } });
  expect(sent.status).toBe(202);
  const done = await waitForStatus(server.url, "sa-1", ["completed", "failed"], 30_000);
  expect(done.status).toBe("completed");
  expect(done.output).toMatchObject({
    answer: FINAL,
    steps: 3,
    toolCalls: [
      { tool: "lookup_order", input: { orderId: "o-42" }, output: { orderId: "o-42", status: "delivered" } },
      { tool: "refund", input: { orderId: "o-42" }, output: { orderId: "o-42", refunded: 59.9, currency: "EUR" }, approval: { approved: true, approver: "alice" } },
    ],
  });
  expect(model.requests).toHaveLength(3);
  // The third completion was given both tool results (the refund's after the approval).
  const toolMessages = model.requests[2]!.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
  expect(toolMessages).toHaveLength(2);
  expect(toolMessages[1]).toContain("refunded");

  // Resumed from the last event it saw, on the new server: the decision, the final answer's tokens, the end.
  const after = await readStream(server.url, "sa-1", () => false, lastId);
  expect(after.every((e) => e.event === "end" || Number(e.id) > Number(lastId))).toBe(true);
  expect(after.filter((e) => e.event === "chunk" && item(e).topic === "tokens").map((e) => item(e).data as string).join("")).toBe(FINAL);
  expect(after.find((e) => e.event === "emit")).toBeDefined();
  expect(item(after.find((e) => e.event === "emit")!).data).toMatchObject({ type: "approval", approved: true, approver: "alice" });
  expect(after.at(-1)).toMatchObject({ event: "end" });
  expect(JSON.parse(after.at(-1)!.data)).toMatchObject({ status: "completed" });
});
