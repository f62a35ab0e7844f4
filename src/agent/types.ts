/**
 * The agent's public shapes: tools, options, the recorded model turn and the
 * run's result. Kept apart from the loop so the loop and the model call
 * (two activities' worth of code) share one definition of each.
 */
import type { FlexibleSchema, LanguageModel, ModelMessage } from "ai";
import type { ActivityContext } from "../core/context.ts";
import type { RetryPolicy } from "../core/retry.ts";
import type { Workflow } from "../core/definitions.ts";
import type { AgentMcpOptions } from "./mcp-tools.ts";

/**
 * A tool the model may call. Each call runs as its own activity
 * (`{agent}.tool.{name}:n`) with its own retries — or, with `workflow`
 * instead of `execute`, as a child instance of one of the app's workflows
 * (`invoke`) — and its result is recorded, so a replay hands the model the
 * same result without running the tool again.
 */
export interface AgentTool<I = any, O = any> {
  /** What the tool does, for the model. */
  description?: string;
  /** The input's schema (zod or `jsonSchema(…)`): the model sees it, and its calls are checked against it. */
  inputSchema: FlexibleSchema<I>;
  /** Runs in an activity: at-least-once unless `transactional`, so pass `ctx.idempotencyKey` downstream. */
  execute?: (input: I, ctx: ActivityContext) => Promise<O> | O;
  /**
   * Instead of `execute`: run the call as a child instance of this workflow
   * (it must be one of the app's), the input its input, its output the
   * result. `retry`, `transactional` and `timeoutSeconds` are the workflow's
   * own business then.
   */
  workflow?: Workflow<I, O, string, any>;
  /**
   * Wait for a human decision before the tool runs: a message on the
   * agent's approval channel (`{ approved, approver?, reason? }`). A
   * function decides per input; it runs in workflow code, so it must be
   * deterministic (no clock, no I/O).
   */
  needsApproval?: boolean | ((input: I) => boolean);
  /** Retry policy of the tool's activity (default: the app's). */
  retry?: RetryPolicy;
  /** Run inside the step's transaction, exactly-once for database work (default false: tools usually call out). */
  transactional?: boolean;
  /** Limit on one attempt of the tool (ActivityTimeoutError, retried under `retry`). */
  timeoutSeconds?: number;
}

/** A record of tools by the name the model calls them with. */
export type AgentTools = Record<string, AgentTool>;

/** The approval gate of tools with `needsApproval`. */
export interface AgentApprovalOptions {
  /**
   * How a decision arrives: `"message"` (default), a message on `channel`
   * (`POST /instances/:id/messages`); `"webhook"`, a POST of the decision to a
   * URL of this wait's own (`createWebhook`; needs EDDA_SECRET), given in the
   * `approval-requested` event as `url`.
   */
  via?: "message" | "webhook";
  /** The channel decisions arrive on (default "approval"). */
  channel?: string;
  /** How long a tool waits for its decision (default one day); past it the call is denied to the model. */
  timeoutSeconds?: number;
}

export interface AgentOptions<T extends AgentTools = AgentTools> {
  /**
   * The model, or a function that returns it. It is called only inside the
   * model-call activity: a replay never builds or calls the model.
   */
  model: LanguageModel | (() => LanguageModel | Promise<LanguageModel>);
  /** The system prompt. */
  system?: string;
  /** The tools the model may call, by name. */
  tools?: T;
  /** A remote MCP server whose tools the model may call too (Streamable HTTP; mcp-tools.ts). */
  mcp?: AgentMcpOptions;
  /** The step budget: model calls per run (default 10); past it the run throws AgentStepLimitError. */
  maxSteps?: number;
  /** Where and how long tools with `needsApproval` wait for their decision. */
  approval?: AgentApprovalOptions;
  /**
   * Where tokens go on the instance's stream: text deltas as strings on
   * `topic` (default "tokens"), tool and approval events as objects on
   * `eventsTopic` (default "agent"). `false`: stream nothing.
   */
  stream?: false | { topic?: string; eventsTopic?: string };
  /** Retry policy of the model-call activity (default: the app's). A failed call is retried durably. */
  retry?: RetryPolicy;
  /** Limit on one model call attempt. */
  timeoutSeconds?: number;
  /** Sampling temperature, passed to the model on each call. */
  temperature?: number;
  /** Most tokens one model call may generate. */
  maxOutputTokens?: number;
}

/** Input of one run: a prompt, or the conversation so far. */
export type AgentInput = { prompt: string; messages?: never } | { messages: ModelMessage[]; prompt?: never };

/** Tokens used, summed over the run's model calls. */
export interface AgentUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
}

/** One model call as the history records it: the new assistant message and what it asks for. */
export interface ModelTurn {
  /** The response's messages (the assistant's text and tool calls; never tool results). */
  messages: ModelMessage[];
  toolCalls: { toolCallId: string; toolName: string; input: unknown; error?: string }[];
  text: string;
  finishReason: string;
  usage: AgentUsage;
}

/** What a tool call ended with, in the run's result. */
export interface AgentToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
  /** Present when the tool ran and returned. */
  output?: unknown;
  /** Present when the tool was not run or failed: the text the model was given. */
  error?: string;
  /** Present for tools that need approval. */
  approval?: { approved: boolean; approver: string | null; reason: string | null };
}

/** What `agent.run` resolves with. */
export interface AgentResult {
  /** The final answer's text. */
  text: string;
  /** Model calls made (at most `maxSteps`). */
  steps: number;
  finishReason: string;
  usage: AgentUsage;
  toolCalls: AgentToolCall[];
  /** The whole conversation: the input's messages, then every assistant and tool message. */
  messages: ModelMessage[];
}
