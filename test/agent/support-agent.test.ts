// The support_agent example in-process on real Postgres, through the AI
// SDK's OpenAI-compatible provider against the local scripted Chat
// Completions server: a model error (HTTP 503) fails the model call's
// attempt and the engine retries it as an activity — the SDK's own retries
// are off, so the server sees exactly one request per attempt — and the
// second attempt's answer is the run's output.
import { afterAll, beforeAll, expect, it } from "vitest";
import { supportAgent } from "../../functions/workflows/support-agent.ts";
import type { Database } from "../../src/storage/database.ts";
import { startChatCompletionsServer, type ChatCompletionsServer } from "../support/chat-completions-server.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

let model: ChatCompletionsServer;
let database: Database;
let t: TestApp;
beforeAll(async () => {
  model = await startChatCompletionsServer([{ status: 503, body: JSON.stringify({ error: { message: "overloaded", type: "server_error" } }) }, { text: "Order o-41 has shipped." }]);
  Object.assign(process.env, { EDDA_AI_BASE_URL: model.baseUrl, EDDA_AI_MODEL: "scripted-model" });
  database = await openTestDatabase("postgres-js", "support_agent");
  t = makeTestApp(database, { workflows: [supportAgent] });
}, 60_000);
afterAll(async () => {
  await t?.edda.close();
  await database?.close();
  await model?.close();
  delete process.env.EDDA_AI_BASE_URL;
  delete process.env.EDDA_AI_MODEL;
});

it("a 503 from the model is one failed attempt of support_agent.model:1, retried by the engine after its backoff: 2 completions, the second's answer", { timeout: 30_000 }, async () => {
  const { instanceId } = await t.edda.start("support_agent", { question: "Where is o-41?" });
  const done = await t.waitFor(instanceId, ["completed", "failed"], 20_000);
  expect(done.status).toBe("completed");
  expect(done.output).toEqual({ answer: "Order o-41 has shipped.", steps: 1, toolCalls: [] });
  expect(model.requests).toHaveLength(2);
  const model1 = (done.history ?? []).filter((h) => h.activityId.startsWith("support_agent.model:1"));
  expect(model1.map((h) => h.eventType)).toEqual(["ActivityAttemptFailed", "TimerExpired", "ActivityCompleted"]);
  expect(JSON.stringify(model1[0]!.data)).toContain("overloaded");
});
