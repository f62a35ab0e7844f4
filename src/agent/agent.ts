/**
 * A durable agent loop in workflow code: model call, tool calls, again, until
 * the model answers without calling a tool or the step budget is spent.
 *
 * Every effect is an Edda operation, so the loop replays from history:
 * - each model call is the activity `{name}.model:n` (model-call.ts); its
 *   recorded turn is what a replay sees, never a new call;
 * - each tool call is the activity `{name}.tool.{tool}:n`, with the tool's
 *   own retries, or a child instance of the tool's workflow; a tool that
 *   fails for good is reported to the model as an error (the failure is
 *   recorded, so every replay reports the same);
 * - a tool with `needsApproval` first emits `approval-requested` on the
 *   stream and waits for a message on the approval channel, or a POST to a
 *   per-wait URL (`via: "webhook"`), with a timeout: approved, the tool
 *   runs; denied or timed out, the model is told so and the tool never runs.
 * The conversation itself is never stored as such: it is rebuilt on each
 * replay from the recorded turns and tool results, so the history grows by
 * one model turn and one result per tool call.
 */
import type { ModelMessage, ToolResultPart } from "ai";
import type { Activity } from "../core/activity.ts";
import type { WorkflowContext } from "../core/context.ts";
import { activity } from "../core/definitions.ts";
import { EddaError, MessageTimeoutError } from "../core/errors.ts";
import { emit } from "../core/stream.ts";
import { waitMessage } from "../core/waits.ts";
import { WebhookExpiredError } from "../core/webhook-waits.ts";
import { createWebhook } from "../engine/webhook-waits.ts";
import { invoke } from "../engine/children.ts";
import { modelCallActivity } from "./model-call.ts";
import { mcpCallActivity } from "./mcp-tools.ts";
import type { AgentInput, AgentOptions, AgentResult, AgentTool, AgentToolCall, AgentTools, AgentUsage, ModelTurn } from "./types.ts";

/** The model asked for tools on its last allowed call: the run ends without a final answer. */
export class AgentStepLimitError extends EddaError {
  override name = "AgentStepLimitError";
  constructor(
    message: string,
    readonly steps: number,
  ) {
    super(message);
  }
}

/** An agent defined with `defineAgent`: its name (its activities' prefix) and options, and `run`. */
export interface Agent<T extends AgentTools = AgentTools> {
  /** The prefix of its activities: `{agentName}.model`, `{agentName}.tool.{tool}`. */
  readonly agentName: string;
  readonly options: AgentOptions<T>;
  /** Run the loop inside a workflow; resolves with the final answer. */
  run(ctx: WorkflowContext, input: AgentInput): Promise<AgentResult>;
}

const DEFAULT_MAX_STEPS = 10;
const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 24 * 3600;

interface Decision {
  approved: boolean;
  approver: string | null;
  reason: string | null;
}

function readDecision(data: unknown): Decision {
  const d = (typeof data === "object" && data !== null ? data : {}) as Record<string, unknown>;
  return {
    approved: d.approved === true,
    approver: typeof d.approver === "string" ? d.approver : null,
    reason: typeof d.reason === "string" ? d.reason : null,
  };
}

/** A tool's output as the model reads it: text stays text, anything else is JSON. */
function toolOutput(value: unknown): ToolResultPart["output"] {
  if (typeof value === "string") return { type: "text", value };
  return { type: "json", value: (value ?? null) as never };
}

const errorText = (err: unknown): string => {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
};

/**
 * Define an agent once, at module level (its activities are registered by
 * name, `{name}.model` and `{name}.tool.{tool}`), and run it from workflows
 * with `agent.run(ctx, { prompt })`.
 */
export function defineAgent<T extends AgentTools>(name: string, options: AgentOptions<T>): Agent<T> {
  const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS;
  if (!Number.isInteger(maxSteps) || maxSteps < 1) throw new TypeError(`agent ${name}: maxSteps must be a positive integer, got ${maxSteps}`);
  const callModel = modelCallActivity(name, options as AgentOptions);
  /** How each tool's call runs: its activity, or a child instance of its workflow. */
  const toolRuns = new Map<string, (ctx: WorkflowContext, input: unknown) => Promise<unknown>>();
  for (const [toolName, t] of Object.entries(options.tools ?? {}) as [string, AgentTool][]) {
    if ((t.execute === undefined) === (t.workflow === undefined)) throw new TypeError(`agent ${name}: tool ${toolName} needs exactly one of execute and workflow`);
    if (t.workflow) {
      const child = t.workflow;
      toolRuns.set(toolName, (ctx, input) => invoke(ctx, child, input));
      continue;
    }
    const execute = t.execute!;
    const run: Activity<[unknown], unknown> = activity(`${name}.tool.${toolName}`, (ctx, input: unknown) => execute(input, ctx), {
      transactional: t.transactional ?? false,
      ...(t.retry ? { retry: t.retry } : {}),
      ...(t.timeoutSeconds !== undefined ? { timeoutSeconds: t.timeoutSeconds } : {}),
    });
    toolRuns.set(toolName, run);
  }
  const callMcp = options.mcp ? mcpCallActivity(name, options.mcp) : undefined;
  const channel = options.approval?.channel ?? "approval";
  const approvalTimeout = options.approval?.timeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_SECONDS;
  const eventsTopic = options.stream === false ? null : (options.stream?.eventsTopic ?? "agent");

  const byWebhook = options.approval?.via === "webhook";

  async function approve(ctx: WorkflowContext, call: ModelTurn["toolCalls"][number]): Promise<Decision> {
    const request = { type: "approval-requested", toolCallId: call.toolCallId, toolName: call.toolName, input: call.input };
    let decision: Decision;
    try {
      if (byWebhook) {
        const hook = await createWebhook(ctx, { expiresIn: approvalTimeout });
        if (eventsTopic !== null) await emit(ctx, { ...request, url: hook.url }, { topic: eventsTopic });
        decision = readDecision((await hook.wait()).body);
      } else {
        if (eventsTopic !== null) await emit(ctx, { ...request, channel }, { topic: eventsTopic });
        decision = readDecision((await waitMessage(ctx, channel, { timeoutSeconds: approvalTimeout })).data);
      }
    } catch (err) {
      if (!(err instanceof MessageTimeoutError || err instanceof WebhookExpiredError)) throw err;
      decision = { approved: false, approver: null, reason: `no decision within ${approvalTimeout} s` };
    }
    if (eventsTopic !== null) await emit(ctx, { type: "approval", toolCallId: call.toolCallId, toolName: call.toolName, ...decision }, { topic: eventsTopic });
    return decision;
  }

  /** One tool call to its record: checked, approved if it must be, run as its activity. */
  async function runTool(ctx: WorkflowContext, call: ModelTurn["toolCalls"][number], decision: Decision | undefined): Promise<AgentToolCall> {
    const base = { toolCallId: call.toolCallId, toolName: call.toolName, input: call.input, ...(decision ? { approval: decision } : {}) };
    // Not a local tool, yet a name the model was offered: one of the MCP server's (an unknown name is call.error).
    const run = toolRuns.get(call.toolName) ?? (callMcp ? (c: WorkflowContext, input: unknown) => callMcp(c, call.toolName, input) : undefined);
    if (call.error !== undefined) return { ...base, error: call.error };
    if (!run) return { ...base, error: `no tool named "${call.toolName}"` };
    if (decision && !decision.approved) {
      return { ...base, error: `not approved${decision.approver ? ` by ${decision.approver}` : ""}${decision.reason ? `: ${decision.reason}` : ""}` };
    }
    try {
      return { ...base, output: await run(ctx, call.input) };
    } catch (err) {
      return { ...base, error: errorText(err) };
    }
  }

  async function run(ctx: WorkflowContext, input: AgentInput): Promise<AgentResult> {
    const messages: ModelMessage[] = input.messages ? [...input.messages] : [{ role: "user", content: input.prompt }];
    const usage: AgentUsage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };
    const calls: AgentToolCall[] = [];
    for (let step = 1; step <= maxSteps; step++) {
      const turn = await callModel(ctx, messages);
      messages.push(...turn.messages);
      usage.inputTokens += turn.usage.inputTokens;
      usage.outputTokens += turn.usage.outputTokens;
      usage.totalTokens += turn.usage.totalTokens;
      if (turn.toolCalls.length === 0) return { text: turn.text, steps: step, finishReason: turn.finishReason, usage, toolCalls: calls, messages };
      // Decisions first, one wait at a time in the model's order (each takes the next message on the
      // channel); then every tool that may run, together: their activities run in one step.
      const decisions = new Map<string, Decision>();
      for (const call of turn.toolCalls) {
        if (call.error !== undefined) continue;
        const t = options.tools?.[call.toolName];
        const rule = t ? t.needsApproval : options.mcp?.needsApproval;
        const needs = typeof rule === "function" ? (t ? (rule as (input: unknown) => boolean)(call.input) : (rule as (n: string, input: unknown) => boolean)(call.toolName, call.input)) : rule === true;
        if (needs) decisions.set(call.toolCallId, await approve(ctx, call));
      }
      const done = await Promise.all(turn.toolCalls.map((call) => runTool(ctx, call, decisions.get(call.toolCallId))));
      calls.push(...done);
      messages.push({
        role: "tool",
        content: done.map((c) => ({
          type: "tool-result" as const,
          toolCallId: c.toolCallId,
          toolName: c.toolName,
          output: c.error !== undefined ? ({ type: "error-text", value: c.error } as const) : toolOutput(c.output),
        })),
      });
    }
    throw new AgentStepLimitError(`agent "${name}" made ${maxSteps} model calls (its maxSteps) without a final answer`, maxSteps);
  }

  return { agentName: name, options, run };
}
