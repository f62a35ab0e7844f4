/**
 * `edda-edge/mcp`: an MCP server at `/mcp` that starts and follows the workflows. Its own entry, so the MCP
 * SDK (and the JSON-schema validator it brings) is only in the bundles of apps
 * that pass `mcp: mcp()`.
 */
export { mcp, type McpExposure, type McpOptions } from "./http/mcp/index.ts";
