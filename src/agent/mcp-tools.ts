/**
 * Remote MCP tools for an agent (`mcp: { url, headers }`): the server's tools
 * are listed inside each model-call activity (so the list the model saw is
 * part of that call's recorded turn, never listed again on replay) and a call
 * of one is the activity `{agent}.mcp:n`, `tools/call` over Streamable HTTP,
 * with the agent's `mcp.retry`. The session comes from `mcp.connect`
 * (`mcpOverHttp` in mcp-client.ts, the MCP SDK's client): this module
 * imports no MCP code, so an agent without `mcp` bundles none.
 */
import { jsonSchema, type ToolSet } from "ai";
import { activity } from "../core/definitions.ts";
import type { Activity } from "../core/activity.ts";
import { TerminalError } from "../core/errors.ts";
import type { RetryPolicy } from "../core/retry.ts";

/** An open MCP client session, as the MCP SDK's `Client` offers it. */
export interface McpConnection {
  listTools(): Promise<{ tools: { name: string; description?: string; inputSchema: unknown }[] }>;
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<{ content?: unknown; isError?: boolean; structuredContent?: unknown }>;
  close(): Promise<void>;
}

export interface AgentMcpOptions {
  /** Opens a session with the server: `mcpOverHttp({ url, headers })` (edda-edge/agent), or your own client. */
  connect: (signal?: AbortSignal) => Promise<McpConnection>;
  /** Which remote tools need approval before they run (default none). */
  needsApproval?: boolean | ((toolName: string, input: unknown) => boolean);
  /** Retry policy of `{agent}.mcp` (default: the app's). */
  retry?: RetryPolicy;
}

/** The remote tools as the AI SDK declares them to the model (names a local tool has are left out). */
export async function listMcpTools(opts: AgentMcpOptions, local: ReadonlySet<string>, signal?: AbortSignal): Promise<ToolSet> {
  const client = await opts.connect(signal);
  try {
    const out: ToolSet = {};
    for (const t of (await client.listTools()).tools) {
      if (local.has(t.name)) continue;
      out[t.name] = { ...(t.description ? { description: t.description } : {}), inputSchema: jsonSchema(t.inputSchema as Parameters<typeof jsonSchema>[0]) };
    }
    return out;
  } finally {
    await client.close();
  }
}

/** `{agent}.mcp`: one `tools/call`; a result the server marks `isError` is a TerminalError (the model is told, nothing retried). */
export function mcpCallActivity(name: string, opts: AgentMcpOptions): Activity<[string, unknown], unknown> {
  return activity(
    `${name}.mcp`,
    async (ctx, toolName: string, input: unknown) => {
      const client = await opts.connect(ctx.signal);
      try {
        const r = await client.callTool({ name: toolName, arguments: (input ?? {}) as Record<string, unknown> });
        const content = (r.content ?? []) as { type: string; text?: string }[];
        const text = content.filter((c) => c.type === "text").map((c) => c.text ?? "").join("\n");
        if (r.isError) throw new TerminalError(text || `MCP tool ${toolName} failed`);
        return r.structuredContent ?? text;
      } finally {
        await client.close();
      }
    },
    { transactional: false, ...(opts.retry ? { retry: opts.retry } : {}) },
  );
}
