/**
 * One model call as an activity (`{agent}.model:n`): the AI SDK's
 * `streamText` with the tools declared but not executed (the loop runs each
 * as its own activity), its text deltas written to the instance's stream as
 * they arrive, and the turn — the assistant's message, its tool calls, usage
 * — returned, so the history records it and a replay never calls the model
 * again.
 *
 * The SDK's own retries are off (`maxRetries: 0`): a failed call fails the
 * attempt and the engine retries it durably under the activity's policy (a
 * new attempt's tokens follow a `retry` marker on the stream). A stream that
 * runs out of budget (StreamLimitError) stops streaming; the call goes on.
 */
import { streamText, type LanguageModel, type ModelMessage, type ToolSet } from "ai";
import { activity } from "../core/definitions.ts";
import type { Activity } from "../core/activity.ts";
import type { ActivityContext } from "../core/context.ts";
import { StreamLimitError } from "../core/errors.ts";
import { listMcpTools } from "./mcp-tools.ts";
import type { AgentOptions, AgentTools, ModelTurn } from "./types.ts";

/** Writes to the attempt's stream until the stream refuses (budget spent): tokens are a view, the recorded turn is the truth. */
function streamWriter(ctx: ActivityContext, topic: string | null) {
  let open = topic !== null;
  return {
    write(data: unknown) {
      if (!open) return;
      try {
        ctx.stream.write(data, { topic: topic! });
      } catch (err) {
        if (!(err instanceof StreamLimitError)) throw err;
        open = false;
      }
    },
    async close() {
      if (open) await ctx.stream.close();
    },
  };
}

export function modelCallActivity(name: string, opts: AgentOptions): Activity<[ModelMessage[]], ModelTurn> {
  const local: ToolSet = {};
  for (const [toolName, t] of Object.entries(opts.tools ?? ({} as AgentTools))) {
    local[toolName] = { ...(t.description !== undefined ? { description: t.description } : {}), inputSchema: t.inputSchema };
  }
  const topic = opts.stream === false ? null : (opts.stream?.topic ?? "tokens");
  return activity(
    `${name}.model`,
    async (ctx, messages: ModelMessage[]): Promise<ModelTurn> => {
      const model: LanguageModel = typeof opts.model === "function" ? await opts.model() : opts.model;
      // A remote server's tools as it lists them now: the turn records what the model called.
      const tools: ToolSet = opts.mcp ? { ...(await listMcpTools(opts.mcp, new Set(Object.keys(local)), ctx.signal)), ...local } : local;
      const result = streamText({
        model,
        ...(opts.system !== undefined ? { system: opts.system } : {}),
        messages,
        tools,
        maxRetries: 0,
        abortSignal: ctx.signal,
        ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
        ...(opts.maxOutputTokens !== undefined ? { maxOutputTokens: opts.maxOutputTokens } : {}),
      });
      const out = streamWriter(ctx, topic);
      for await (const part of result.fullStream) {
        if (part.type === "text-delta") out.write(part.text);
        else if (part.type === "error") throw part.error;
        else if (part.type === "abort") throw ctx.signal.reason ?? new Error(`model call of agent "${name}" aborted`);
      }
      await out.close();
      const [response, toolCalls, text, finishReason, usage] = await Promise.all([result.response, result.toolCalls, result.text, result.finishReason, result.usage]);
      return {
        // Tool results are the loop's (each an activity); the SDK adds none for tools without `execute`, but an
        // invalid call may come back as a tool message of its own: the loop answers every call itself.
        messages: response.messages.filter((m) => m.role !== "tool"),
        toolCalls: toolCalls.map((c) => {
          const invalid = (c as { invalid?: boolean; error?: unknown }).invalid === true;
          const error = (c as { error?: unknown }).error;
          return {
            toolCallId: c.toolCallId,
            toolName: c.toolName,
            input: c.input ?? null,
            ...(invalid ? { error: error instanceof Error ? error.message : `invalid call of tool "${c.toolName}"` } : {}),
          };
        }),
        text,
        finishReason,
        usage: { inputTokens: usage.inputTokens ?? 0, outputTokens: usage.outputTokens ?? 0, totalTokens: usage.totalTokens ?? 0 },
      };
    },
    {
      transactional: false,
      ...(opts.retry ? { retry: opts.retry } : {}),
      ...(opts.timeoutSeconds !== undefined ? { timeoutSeconds: opts.timeoutSeconds } : {}),
    },
  );
}
