/**
 * Remote MCP tools for an agent (`mcp: { url, headers }`): the server's tools
 * are listed inside each model-call activity (so the list the model saw is
 * part of that call's recorded turn, never listed again on replay) and a call
 * of one is the activity `{agent}.mcp:n`, `tools/call` over Streamable HTTP,
 * with the agent's `mcp.retry`. The MCP client SDK is imported lazily, when
 * an agent with `mcp` first lists or calls: an agent without it never loads
 * it (a bundler may still include it as a chunk).
 */
import { jsonSchema, type ToolSet } from "ai";
import { activity } from "../core/definitions.ts";
import type { Activity } from "../core/activity.ts";
import { TerminalError } from "../core/errors.ts";
import type { RetryPolicy } from "../core/retry.ts";

export interface AgentMcpOptions {
  /** The server's Streamable HTTP endpoint (`https://…/mcp`). */
  url: string | (() => string);
  /** Sent with every request (e.g. `authorization`); a function is called in the activity. */
  headers?: Record<string, string> | (() => Record<string, string>);
  /** Which remote tools need approval before they run (default none). */
  needsApproval?: boolean | ((toolName: string, input: unknown) => boolean);
  /** Retry policy of `{agent}.mcp` (default: the app's). */
  retry?: RetryPolicy;
}

const resolve = <T>(v: T | (() => T)): T => (typeof v === "function" ? (v as () => T)() : v);

async function connect(opts: AgentMcpOptions, signal?: AbortSignal) {
  const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([import("@modelcontextprotocol/sdk/client/index.js"), import("@modelcontextprotocol/sdk/client/streamableHttp.js")]);
  const client = new Client({ name: "edda-edge-agent", version: "1" });
  const headers = opts.headers ? resolve(opts.headers) : undefined;
  await client.connect(new StreamableHTTPClientTransport(new URL(resolve(opts.url)), { requestInit: { ...(headers ? { headers } : {}), ...(signal ? { signal } : {}) } }));
  return client;
}

/** The remote tools as the AI SDK declares them to the model (names a local tool has are left out). */
export async function listMcpTools(opts: AgentMcpOptions, local: ReadonlySet<string>, signal?: AbortSignal): Promise<ToolSet> {
  const client = await connect(opts, signal);
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
      const client = await connect(opts, ctx.signal);
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
