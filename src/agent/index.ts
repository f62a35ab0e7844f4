/**
 * `edda-edge/agent`: durable AI agents on the AI SDK (`ai`). A separate entry,
 * so an app that does not import it bundles none of the SDK. Bring any
 * `LanguageModel` (e.g. `@ai-sdk/openai-compatible` for a Chat Completions
 * endpoint); see docs/agents.md.
 */
export { defineAgent, AgentStepLimitError, type Agent } from "./agent.ts";
export type { AgentMcpOptions, McpConnection } from "./mcp-tools.ts";
export { mcpOverHttp, type McpOverHttpOptions } from "./mcp-client.ts";
export type { AgentApprovalOptions, AgentInput, AgentOptions, AgentResult, AgentTool, AgentToolCall, AgentTools, AgentUsage, ModelTurn } from "./types.ts";

import type { AgentTool } from "./types.ts";

/** A tool, typed by its schema (an identity function, as the AI SDK's `tool()`). */
export function agentTool<I, O>(tool: AgentTool<I, O>): AgentTool<I, O> {
  return tool;
}
