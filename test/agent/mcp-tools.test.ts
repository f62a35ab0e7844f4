// Remote MCP tools (src/agent/mcp-tools.ts) on real Postgres: an agent whose
// `mcp` names another Edda app's MCP endpoint (served on 127.0.0.1, Streamable
// HTTP, the MCP SDK's client on our side) is offered that server's tools; the
// model's call of `start_workflow` is the activity `{agent}.mcp:1`, starts the
// workflow on the remote app once, and its result is what the model reads
// next. The mock model is the AI SDK's MockLanguageModelV4.
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai/test";
import type { LanguageModelV4CallOptions, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { afterAll, beforeAll, expect, it } from "vitest";
import { defineAgent, mcpOverHttp } from "../../src/agent/index.ts";
import { workflow } from "../../src/index.ts";
import { mcp } from "../../src/mcp.ts";
import type { Database } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { serveTestApp, type Listening } from "../support/listen.ts";

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const script: LanguageModelV4StreamPart[][] = [
  [{ type: "tool-call", toolCallId: "c1", toolName: "start_workflow", input: JSON.stringify({ workflow: "order_status", input: { orderId: "o-5" } }) }, { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage }],
  [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "Started." }, { type: "text-end", id: "t" }, { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage }],
];
const calls: LanguageModelV4CallOptions[] = [];
const model = new MockLanguageModelV4({
  doStream: async (options) => {
    calls.push(options);
    return { stream: convertArrayToReadableStream(script[calls.length - 1]!) };
  },
});

const orderStatus = workflow("order_status", async (_ctx, { orderId }: { orderId: string }) => ({ orderId, status: "shipped" }));
let remoteUrl = "";
const agent = defineAgent("remote_tools", { model, mcp: { connect: mcpOverHttp({ url: () => `${remoteUrl}/mcp` }) } });
const flow = workflow("remote_tools_agent", async (ctx, { question }: { question: string }) => agent.run(ctx, { prompt: question }));

let local: TestApp;
let localDb: Database;
let remote: Listening;
let remoteApp: TestApp;
beforeAll(async () => {
  remoteApp = makeTestApp(await openTestDatabase("postgres-js", "agent_mcp_remote"), { workflows: [orderStatus], mcp: mcp() });
  remote = await serveTestApp(remoteApp);
  remoteUrl = remote.url;
  localDb = await openTestDatabase("postgres-js", "agent_mcp_local");
  local = makeTestApp(localDb, { workflows: [flow] });
}, 60_000);
afterAll(async () => {
  await local?.edda.close();
  await localDb?.close();
  await remote?.close();
});

it("the remote server's tools are offered to the model; a call of one is {agent}.mcp:1, run once on the remote app, its result the model's next input", { timeout: 30_000 }, async () => {
  const { instanceId } = await local.edda.start("remote_tools_agent", { question: "Start a status check of o-5" });
  const done = await local.waitFor(instanceId, ["completed", "failed"], 20_000);
  expect(done.status, JSON.stringify(done.error)).toBe("completed");
  const offered = (calls[0]!.tools ?? []).map((t) => t.name);
  expect(offered).toEqual(expect.arrayContaining(["start_workflow", "instance_status", "instance_result"]));
  expect(done.output).toMatchObject({ text: "Started.", toolCalls: [{ toolName: "start_workflow", output: { workflow: "order_status" } }] });
  const started = (done.output as { toolCalls: { output: { instance_id: string } }[] }).toolCalls[0]!.output.instance_id;
  expect((await remoteApp.waitFor(started)).output).toEqual({ orderId: "o-5", status: "shipped" });
  expect((await remoteApp.edda.findInstances({ workflowName: "order_status" })).instances).toHaveLength(1);
  expect((done.history ?? []).filter((h) => h.eventType === "ActivityCompleted").map((h) => h.activityId)).toEqual(["remote_tools.model:1", "remote_tools.mcp:1", "remote_tools.model:2"]);
  const toolMessage = calls[1]!.prompt.find((m) => m.role === "tool");
  expect(JSON.stringify(toolMessage)).toContain(started);
});
