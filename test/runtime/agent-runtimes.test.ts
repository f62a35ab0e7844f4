// support_agent in real Deno and in real workerd (wrangler dev), each on a
// fresh Postgres database against its own scripted OpenAI-compatible server:
// asked to refund o-42 it looks the order up, waits for approval, runs the
// refund once approved and answers with the model's final text — 3
// completions, the AI SDK fetching from inside the runtime.
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { startChatCompletionsServer, type ChatCompletionsServer } from "../support/chat-completions-server.ts";
import { freshDatabase } from "../support/db.ts";
import { freePort } from "../support/postgres-cluster.ts";
import { api, ROOT, spawnServer, startWrangler, waitForStatus, type Server } from "./processes.ts";

const FINAL = "Refunded o-42 (59.9 EUR).";
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setUp(prefix: string): Promise<{ model: ChatCompletionsServer; databaseUrl: string }> {
  const model = await startChatCompletionsServer([
    { text: "Checking.", toolCalls: [{ name: "lookup_order", arguments: { orderId: "o-42" } }] },
    { toolCalls: [{ name: "refund", arguments: { orderId: "o-42" } }] },
    { text: FINAL },
  ]);
  cleanups.push(() => model.close());
  const databaseUrl = await freshDatabase(prefix);
  const db = createPostgresJsDatabase({ url: databaseUrl, max: 1 });
  await migrate(db.db);
  await db.close();
  return { model, databaseUrl };
}

async function refundFlow(server: Server, model: ChatCompletionsServer, id: string): Promise<void> {
  const started = await api(server.url, "POST", "/workflows/support_agent/instances", { input: { question: "Please refund o-42." }, instanceId: id });
  expect(started.status, server.output()).toBe(201);
  await waitForStatus(server.url, id, ["waiting_for_message"], 60_000);
  expect(model.requests).toHaveLength(2);
  expect((await api(server.url, "POST", `/instances/${id}/messages`, { channel: "approval", data: { approved: true, approver: "alice" } })).status).toBe(202);
  const done = await waitForStatus(server.url, id, ["completed", "failed"], 60_000);
  expect(done.status, server.output()).toBe("completed");
  expect(done.output).toMatchObject({ answer: FINAL, steps: 3, toolCalls: [{ tool: "lookup_order" }, { tool: "refund", approval: { approved: true, approver: "alice" } }] });
  expect(model.requests).toHaveLength(3);
}

it("support_agent in real Deno: refund o-42 waits for approval, runs once approved, answers; 3 completions", { timeout: 120_000 }, async () => {
  const { model, databaseUrl } = await setUp("agent_deno");
  const port = await freePort();
  const server = await spawnServer({
    command: join(ROOT, "node_modules", ".bin", "deno"),
    args: ["run", "-A", "test/runtime/fixtures/agent-deno.ts"],
    port,
    env: { PORT: String(port), NO_COLOR: "1", DATABASE_URL: databaseUrl, EDDA_SECRET: "agent-secret", EDDA_ALLOW_UNAUTHENTICATED: "1", EDDA_SWEEP_INTERVAL_MS: "500", EDDA_AI_BASE_URL: model.baseUrl, EDDA_AI_MODEL: "scripted-model" },
    startTimeoutMs: 90_000,
  });
  cleanups.push(() => server.stop());
  await refundFlow(server, model, "sa-deno");
});

it("support_agent in real workerd: refund o-42 waits for approval, runs once approved, answers; 3 completions", { timeout: 150_000 }, async () => {
  const { model, databaseUrl } = await setUp("agent_workerd");
  const server = await startWrangler(
    { DATABASE_URL: databaseUrl, EDDA_SECRET: "agent-secret", EDDA_ALLOW_UNAUTHENTICATED: "1", EDDA_AI_BASE_URL: model.baseUrl, EDDA_AI_MODEL: "scripted-model" },
    { config: join(ROOT, "test/runtime/fixtures/agent-worker.toml") },
  );
  cleanups.push(() => server.stop());
  await refundFlow(server, model, "sa-workerd");
});
