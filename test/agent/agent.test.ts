// The agent helper (src/agent) on real Postgres with the AI SDK's own mock
// model (MockLanguageModelV4 from ai/test): each model call and each tool call
// is an activity recorded once, so the waits and replays between them never
// call the model or a tool again; a tool that needs approval waits on the
// approval channel and runs only when approved; text deltas reach the
// instance's stream in order; a failed model call is retried as an activity;
// the step budget ends a loop that never answers.
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai/test";
import type { LanguageModelV4CallOptions, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { agentTool, defineAgent } from "../../src/agent/index.ts";
import { engineOf } from "../../src/edda.ts";
import type { Engine } from "../../src/engine/engine.ts";
import type { StreamEvent } from "../../src/engine/stream-reader.ts";
import { fromJson } from "../../src/core/serialization.ts";
import { TerminalError, workflow } from "../../src/index.ts";
import type { Database } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } };
const text = (...deltas: string[]): LanguageModelV4StreamPart[] => [
  { type: "text-start", id: "t" },
  ...deltas.map((delta) => ({ type: "text-delta" as const, id: "t", delta })),
  { type: "text-end", id: "t" },
];
const call = (toolCallId: string, toolName: string, input: unknown): LanguageModelV4StreamPart => ({ type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) });
const finish = (reason: "stop" | "tool-calls"): LanguageModelV4StreamPart => ({ type: "finish", finishReason: { unified: reason, raw: reason }, usage });

/** A mock model that answers call n with `script[n]` (parts, or an error to throw) and keeps every prompt it was given. */
function scripted(script: (LanguageModelV4StreamPart[] | Error)[]) {
  const prompts: LanguageModelV4CallOptions["prompt"][] = [];
  const model = new MockLanguageModelV4({
    doStream: async (options) => {
      const step = script[prompts.length];
      prompts.push(options.prompt);
      if (step === undefined) throw new Error(`the script has no call ${prompts.length}`);
      if (step instanceof Error) throw step;
      return { stream: convertArrayToReadableStream(step) };
    },
  });
  return { model, prompts };
}

const ran: { tool: string; input: unknown }[] = [];
const tools = {
  lookup_order: agentTool({
    description: "Look up an order",
    inputSchema: z.object({ orderId: z.string() }),
    execute: ({ orderId }) => (ran.push({ tool: "lookup_order", input: { orderId } }), { orderId, total: 59.9 }),
  }),
  refund: agentTool({
    description: "Refund an order",
    inputSchema: z.object({ orderId: z.string() }),
    needsApproval: true,
    execute: ({ orderId }, ctx) => (ran.push({ tool: "refund", input: { orderId } }), { refunded: orderId, key: ctx.idempotencyKey }),
  }),
  broken: agentTool({
    inputSchema: z.object({}),
    execute: () => {
      throw new TerminalError("the ledger is closed");
    },
  }),
};

/** The model of the running test (the agents are defined once; each test swaps the script in). */
let current = scripted([]);
const shop = defineAgent("shop", { model: () => current.model, tools, approval: { channel: "approval", timeoutSeconds: 600 }, retry: { initialIntervalSeconds: 0.05, maxAttempts: 3 } });
const budgeted = defineAgent("budgeted", { model: () => current.model, tools, maxSteps: 2 });
const hooked = defineAgent("hooked", { model: () => current.model, tools, approval: { via: "webhook", timeoutSeconds: 600 } });
/** A tool that is one of the app's workflows: each call a child instance. */
const orderStatus = workflow("order_status", async (_ctx, { orderId }: { orderId: string }) => ({ orderId, status: orderId === "o-9" ? "lost" : "shipped" }));
const delegating = defineAgent("delegating", { model: () => current.model, tools: { order_status: agentTool({ description: "An order's status", inputSchema: z.object({ orderId: z.string() }), workflow: orderStatus }) } });
const delegatingFlow = workflow("delegating_agent", async (ctx, { question }: { question: string }) => delegating.run(ctx, { prompt: question }));
const hookedFlow = workflow("hooked_agent", async (ctx, { question }: { question: string }) => hooked.run(ctx, { prompt: question }));
const shopFlow = workflow("shop_agent", async (ctx, { question }: { question: string }) => shop.run(ctx, { prompt: question }));
const budgetFlow = workflow("budgeted_agent", async (ctx, { question }: { question: string }) => budgeted.run(ctx, { prompt: question }));

/** The refund conversation: look up, ask to refund, then answer. */
const refundScript = () => [
  [...text("Let me ", "check."), call("c1", "lookup_order", { orderId: "o-42" }), finish("tool-calls")],
  [call("c2", "refund", { orderId: "o-42" }), finish("tool-calls")],
  [...text("Refunded ", "o-42."), finish("stop")],
];

/** The tool results the model was given in its last prompt. */
const toolResults = (prompt: LanguageModelV4CallOptions["prompt"] | undefined) =>
  (prompt ?? []).filter((m) => m.role === "tool").flatMap((m) => m.content.map((p) => (p.type === "tool-result" ? { toolName: p.toolName, output: p.output } : p)));

let database: Database;
let t: TestApp;
let engine: Engine;
beforeAll(async () => {
  database = await openTestDatabase("postgres-js", "agent");
  t = makeTestApp(database, { workflows: [shopFlow, budgetFlow, hookedFlow, orderStatus, delegatingFlow] });
  engine = await engineOf(t.edda);
}, 60_000);
afterAll(async () => {
  await t?.edda.close();
  await database?.close();
});

/** The stream's JSON items (until the end, or the first `count`). */
async function streamOf(id: string, topics?: string[], count = Infinity): Promise<unknown[]> {
  const events = await engine.openStream(id, { after: 0, ...(topics ? { topics } : {}) });
  const out: unknown[] = [];
  for await (const ev of events! as AsyncIterable<StreamEvent>) {
    if (ev.type === "item" && ev.item.data.type === "json") out.push(fromJson(ev.item.data.json));
    if (out.length >= count) break;
  }
  return out;
}

async function historyIds(id: string): Promise<string[]> {
  const inst = await t.edda.getInstance(id, { history: true });
  return (inst?.history ?? []).filter((h) => h.eventType === "ActivityCompleted" || h.eventType === "MessageReceived").map((h) => h.activityId);
}

describe("an agent with an approval gate", () => {
  it("looks up, waits for approval (why: message) without calling the model again, runs the refund once approved, answers; 3 model calls, each tool once", { timeout: 30_000 }, async () => {
    current = scripted(refundScript());
    ran.length = 0;
    const { instanceId } = await t.edda.start("shop_agent", { question: "Please refund o-42" });
    await t.waitFor(instanceId, ["waiting_for_message"]);
    expect(current.prompts).toHaveLength(2);
    expect(ran).toEqual([{ tool: "lookup_order", input: { orderId: "o-42" } }]);
    expect((await t.edda.why(instanceId))?.reason.kind).toBe("message");

    await t.edda.publish("approval", { approved: true, approver: "alice" }, { targetInstanceId: instanceId });
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("completed");
    expect(done.output).toMatchObject({
      text: "Refunded o-42.",
      steps: 3,
      finishReason: "stop",
      usage: { inputTokens: 30, outputTokens: 15, totalTokens: 45 },
      toolCalls: [
        { toolName: "lookup_order", input: { orderId: "o-42" }, output: { orderId: "o-42", total: 59.9 } },
        { toolName: "refund", input: { orderId: "o-42" }, output: { refunded: "o-42", key: `${instanceId}:shop.tool.refund:1` }, approval: { approved: true, approver: "alice", reason: null } },
      ],
    });
    // Three calls in all however often the workflow replayed; each tool ran once.
    expect(current.prompts).toHaveLength(3);
    expect(ran.map((r) => r.tool)).toEqual(["lookup_order", "refund"]);
    expect(toolResults(current.prompts[2])).toEqual([
      { toolName: "lookup_order", output: { type: "json", value: { orderId: "o-42", total: 59.9 } } },
      { toolName: "refund", output: { type: "json", value: { refunded: "o-42", key: `${instanceId}:shop.tool.refund:1` } } },
    ]);
    expect(await historyIds(instanceId)).toEqual(["shop.model:1", "shop.tool.lookup_order:1", "shop.model:2", "receive_approval:1", "shop.tool.refund:1", "shop.model:3"]);

    // The stream: the tokens in order on "tokens"; the approval request and decision on "agent".
    expect(await streamOf(instanceId, ["tokens"])).toEqual(["Let me ", "check.", "Refunded ", "o-42."]);
    expect(await streamOf(instanceId, ["agent"])).toEqual([
      { type: "approval-requested", toolCallId: "c2", toolName: "refund", input: { orderId: "o-42" }, channel: "approval" },
      { type: "approval", toolCallId: "c2", toolName: "refund", approved: true, approver: "alice", reason: null },
    ]);
  });

  it("a denied refund never runs: the model is told who denied it, and answers", { timeout: 30_000 }, async () => {
    current = scripted([[call("c1", "refund", { orderId: "o-42" }), finish("tool-calls")], [...text("Sorry, no refund."), finish("stop")]]);
    ran.length = 0;
    const { instanceId } = await t.edda.start("shop_agent", { question: "Refund o-42" });
    await t.waitFor(instanceId, ["waiting_for_message"]);
    await t.edda.publish("approval", { approved: false, approver: "bob", reason: "outside the window" }, { targetInstanceId: instanceId });
    const done = await t.waitFor(instanceId);
    expect(done.output).toMatchObject({ text: "Sorry, no refund.", toolCalls: [{ toolName: "refund", error: "not approved by bob: outside the window" }] });
    expect(ran).toEqual([]);
    expect(toolResults(current.prompts[1])).toEqual([{ toolName: "refund", output: { type: "error-text", value: "not approved by bob: outside the window" } }]);
  });
});

describe("an approval by per-wait URL (via: webhook)", () => {
  it("the approval request carries a URL of the wait's own; a POST of the decision to it runs the refund, a second POST is 410", { timeout: 30_000 }, async () => {
    current = scripted([[call("c1", "refund", { orderId: "o-7" }), finish("tool-calls")], [...text("Done."), finish("stop")]]);
    ran.length = 0;
    const { instanceId } = await t.edda.start("hooked_agent", { question: "Refund o-7" });
    await t.waitFor(instanceId, ["waiting_for_webhook"]);
    const [requested] = (await streamOf(instanceId, ["agent"], 1)) as { type: string; url?: string }[];
    expect(requested).toMatchObject({ type: "approval-requested", toolName: "refund", input: { orderId: "o-7" } });
    const url = requested!.url!;
    expect(url).toMatch(/^\/hooks\/[A-Za-z0-9_-]{43}$/);
    expect((await t.edda.why(instanceId))?.reason.kind).toBe("webhook");
    expect(ran).toEqual([]);
    const post = (body: unknown) => t.edda.fetch(new Request(`http://127.0.0.1${url}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
    expect((await post({ approved: true, approver: "carol" })).status).toBe(202);
    const done = await t.waitFor(instanceId);
    expect(done.output).toMatchObject({ text: "Done.", toolCalls: [{ toolName: "refund", output: { refunded: "o-7" }, approval: { approved: true, approver: "carol" } }] });
    expect(ran.map((r) => r.tool)).toEqual(["refund"]);
    expect((await post({ approved: true, approver: "mallory" })).status).toBe(410);
  });
});

describe("a workflow as a tool", () => {
  it("each call of the tool is a child instance of its workflow; its output is the result the model reads", { timeout: 30_000 }, async () => {
    current = scripted([[call("c1", "order_status", { orderId: "o-9" }), finish("tool-calls")], [...text("It is lost."), finish("stop")]]);
    const { instanceId } = await t.edda.start("delegating_agent", { question: "Where is o-9?" });
    const done = await t.waitFor(instanceId);
    expect(done.output).toMatchObject({ text: "It is lost.", toolCalls: [{ toolName: "order_status", output: { orderId: "o-9", status: "lost" } }] });
    expect(toolResults(current.prompts[1])).toEqual([{ toolName: "order_status", output: { type: "json", value: { orderId: "o-9", status: "lost" } } }]);
    const children = (await t.edda.findInstances({ workflowName: "order_status" })).instances;
    expect(children).toHaveLength(1);
    expect(children[0]).toMatchObject({ status: "completed" });
  });

  it("a tool needs exactly one of execute and workflow", () => {
    expect(() => defineAgent("neither", { model: () => current.model, tools: { x: { inputSchema: z.object({}) } } })).toThrow(/exactly one of execute and workflow/);
  });
});

describe("failures and limits", () => {
  it("a failed model call is retried as an activity: the failed attempt recorded, its backoff a durable timer, the second attempt's turn the result", { timeout: 30_000 }, async () => {
    current = scripted([new Error("upstream 503"), [...text("Hello."), finish("stop")]]);
    const { instanceId } = await t.edda.start("shop_agent", { question: "hi" });
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("completed");
    expect(done.output).toMatchObject({ text: "Hello.", steps: 1 });
    expect(current.prompts).toHaveLength(2);
    const history = (await t.edda.getInstance(instanceId, { history: true }))?.history ?? [];
    const model1 = history.filter((h) => h.activityId.startsWith("shop.model:1"));
    // The failed attempt is recorded, its backoff is a durable timer, then the turn.
    expect(model1.map((h) => [h.activityId, h.eventType])).toEqual([
      ["shop.model:1#1", "ActivityAttemptFailed"],
      ["shop.model:1#retry1", "TimerExpired"],
      ["shop.model:1", "ActivityCompleted"],
    ]);
    expect(JSON.stringify(model1[0]!.data)).toContain("upstream 503");
  });

  it("a tool that fails for good is reported to the model as an error; the loop goes on", { timeout: 30_000 }, async () => {
    current = scripted([[call("c1", "broken", {}), finish("tool-calls")], [...text("The ledger is closed."), finish("stop")]]);
    const { instanceId } = await t.edda.start("shop_agent", { question: "close" });
    const done = await t.waitFor(instanceId);
    expect(done.output).toMatchObject({ text: "The ledger is closed.", toolCalls: [{ toolName: "broken", error: "the ledger is closed" }] });
    expect(toolResults(current.prompts[1])).toEqual([{ toolName: "broken", output: { type: "error-text", value: "the ledger is closed" } }]);
  });

  it("a call whose input fails the tool's schema never runs the tool: the model is told why", { timeout: 30_000 }, async () => {
    current = scripted([[call("c1", "lookup_order", { orderId: 42 }), finish("tool-calls")], [...text("Which order?"), finish("stop")]]);
    ran.length = 0;
    const { instanceId } = await t.edda.start("shop_agent", { question: "order 42" });
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("completed");
    expect(ran).toEqual([]);
    const [result] = toolResults(current.prompts[1]) as { toolName: string; output: { type: string; value: string } }[];
    expect(result).toMatchObject({ toolName: "lookup_order", output: { type: "error-text" } });
    expect(result!.output.value).toMatch(/orderId|string|input/i);
  });

  it("the step budget: a model that keeps calling tools fails the run with AgentStepLimitError after maxSteps calls", { timeout: 30_000 }, async () => {
    const again = () => [call(`c${Math.random()}`, "lookup_order", { orderId: "o-1" }), finish("tool-calls" as const)];
    current = scripted([again(), again(), again()]);
    const { instanceId } = await t.edda.start("budgeted_agent", { question: "loop" });
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("failed");
    expect(done.error).toMatchObject({ error_type: "AgentStepLimitError" });
    expect(current.prompts).toHaveLength(2);
  });
});
