/**
 * `mcpOverHttp({ url, headers })`: the `connect` of an agent's `mcp` option
 * on the MCP SDK's own client over Streamable HTTP. Its own module, so only
 * an app that calls it bundles the client.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpConnection } from "./mcp-tools.ts";

export interface McpOverHttpOptions {
  /** The server's Streamable HTTP endpoint (`https://…/mcp`); a function is called at each connection. */
  url: string | (() => string);
  /** Sent with every request (e.g. `authorization`); a function is called at each connection. */
  headers?: Record<string, string> | (() => Record<string, string>);
}

const value = <T>(v: T | (() => T)): T => (typeof v === "function" ? (v as () => T)() : v);

export function mcpOverHttp(opts: McpOverHttpOptions): (signal?: AbortSignal) => Promise<McpConnection> {
  return async (signal) => {
    const client = new Client({ name: "edda-edge-agent", version: "1" });
    const headers = opts.headers ? value(opts.headers) : undefined;
    await client.connect(new StreamableHTTPClientTransport(new URL(value(opts.url)), { requestInit: { ...(headers ? { headers } : {}), ...(signal ? { signal } : {}) } }));
    return client as unknown as McpConnection;
  };
}
