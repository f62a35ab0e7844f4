/**
 * `edda-edge/mcp`: workflows as MCP tools at `/mcp`. Its own entry, so the MCP
 * SDK (and the JSON-schema validator it brings) is only in the bundles of apps
 * that pass `mcp: mcp()`.
 */
export { mcp, type McpExposure } from "./http/mcp/index.ts";
