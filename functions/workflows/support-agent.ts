/**
 * Example: a support agent (docs/agents.md). It answers a customer's
 * question with a model from EDDA_AI_BASE_URL / EDDA_AI_MODEL /
 * EDDA_AI_API_KEY (any OpenAI-compatible Chat Completions endpoint) and two
 * tools: `lookup_order`, and `refund`, which waits for a human decision on
 * channel "approval" (`{ "approved": true|false, "approver": "..." }`, sent
 * with `POST /instances/:id/messages`) before it runs. Tokens stream on
 * `GET /instances/:id/stream` (topic "tokens"; approval requests on "agent").
 * With no model configured a start is refused (422, naming the variables)
 * and nothing is created.
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import * as z from "zod";
import { agentTool, defineAgent } from "../../src/agent/index.ts";
import { TerminalError, workflow } from "../../src/index.ts";
import { aiModelSettings } from "../../src/platform/ai-env.ts";

export const NO_MODEL_CONFIGURED = "support_agent needs a model: set EDDA_AI_BASE_URL (an OpenAI-compatible endpoint, e.g. https://api.openai.com/v1) and EDDA_AI_MODEL, and EDDA_AI_API_KEY if the endpoint wants one";

/** The shop's orders (a stand-in for your database). */
const ORDERS: Record<string, { orderId: string; status: string; total: number; currency: string; items: string[] }> = {
  "o-41": { orderId: "o-41", status: "shipped", total: 24.5, currency: "EUR", items: ["mug"] },
  "o-42": { orderId: "o-42", status: "delivered", total: 59.9, currency: "EUR", items: ["kettle"] },
};

const lookupOrder = agentTool({
  description: "Look up an order by its id (like o-42): status, total, items.",
  inputSchema: z.object({ orderId: z.string().describe("The order id, e.g. o-42") }),
  execute: ({ orderId }) => ORDERS[orderId] ?? { orderId, error: "no such order" },
});

const refund = agentTool({
  description: "Refund an order in full. A person approves each refund before it is made.",
  inputSchema: z.object({ orderId: z.string(), reason: z.string().optional() }),
  needsApproval: true,
  execute: ({ orderId }, ctx) => {
    const order = ORDERS[orderId];
    if (!order) throw new TerminalError(`no order ${orderId} to refund`);
    // The idempotency key is stable across retries: a payment API deduplicates the refund with it.
    return { orderId, refunded: order.total, currency: order.currency, refundId: `rf-${ctx.idempotencyKey}` };
  },
});

/** The configured model; built only inside the model-call activity, never on replay. */
function configuredModel() {
  const s = aiModelSettings();
  if (!s) throw new TerminalError(NO_MODEL_CONFIGURED);
  return createOpenAICompatible({ name: "edda-ai", baseURL: s.baseUrl, ...(s.apiKey ? { apiKey: s.apiKey } : {}) }).chatModel(s.model);
}

export const support = defineAgent("support_agent", {
  model: configuredModel,
  system: "You are the support agent of a small shop. Look orders up before you answer about them. Refund only when the customer asks for it; a person approves each refund.",
  tools: { lookup_order: lookupOrder, refund },
  maxSteps: 8,
  approval: { channel: "approval", timeoutSeconds: 24 * 3600 },
});

export const supportAgent = workflow(
  "support_agent",
  {
    description: 'A support agent with tools lookup_order and refund; refund waits for { "approved": true|false, "approver": "..." } on channel "approval". Needs EDDA_AI_BASE_URL and EDDA_AI_MODEL.',
    input: z.object({ question: z.string().min(1).max(4000) }).superRefine((_input, issues) => {
      // Refused at the start (422), before anything is stored: an agent with no model would only fail later.
      if (!aiModelSettings()) issues.addIssue({ code: "custom", message: NO_MODEL_CONFIGURED });
    }),
  },
  async (ctx, { question }) => {
    const r = await support.run(ctx, { prompt: question });
    return {
      answer: r.text,
      steps: r.steps,
      toolCalls: r.toolCalls.map((c) => ({ tool: c.toolName, input: c.input, ...(c.error !== undefined ? { error: c.error } : { output: c.output }), ...(c.approval ? { approval: c.approval } : {}) })),
    };
  },
);
