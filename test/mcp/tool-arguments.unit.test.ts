// MCP tool calls whose arguments are refused before storage: the generic
// tools check their arguments (a workflow the app does not serve, a missing
// instance id, an empty channel, an id that cannot be one) and the workflow's
// input schema, and answer a tool error (isError, the problem in text and
// structured content) — never a protocol error, and with no database asked
// for. The official MCP client over app.fetch, no server. What the tools do
// with valid arguments: exposure.test.ts on PGlite.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { workflow } from "../../src/index.ts";
import { mcp } from "../../src/mcp.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const echo = workflow("echo_text", { input: z.string().min(2) }, async (_ctx, text) => ({ text }));
const t = appWithoutDatabase({ workflows: [echo], mcp: mcp(), allowedHosts: ["edda.test"] });
const c = new Client({ name: "tool-arguments", version: "1.0.0" });
beforeAll(() => c.connect(new StreamableHTTPClientTransport(new URL("http://edda.test/mcp"), { fetch: (url, init) => t.edda.fetch(new Request(url, init)) })));
afterAll(async () => {
  await c.close();
  await t.edda.close();
});

const call = async (name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as CallToolResult;
const text = (r: CallToolResult) => (r.content[0] as { text: string }).text;

describe("tool arguments", () => {
  it("invalid arguments of the generic tools are tool errors naming the argument", async () => {
    for (const [name, args, says] of [
      ["start_workflow", { workflow: "nope", input: "hi" }, /arguments for start_workflow are invalid:\n- workflow:/],
      ["instance_status", {}, /arguments for instance_status are invalid:\n- instance_id:/],
      ["send_message", { instance_id: "i-1", channel: "" }, /- channel: Too small/],
      ["cancel_instance", { instance_id: 5 }, /- instance_id:/],
    ] as const) {
      const r = await call(name, args);
      expect(r.isError, name).toBe(true);
      expect(text(r), name).toMatch(says);
      expect(r.structuredContent, name).toMatchObject({ error: expect.stringContaining(`arguments for ${name} are invalid`) });
    }
    expect(t.touched).toEqual([]);
  });

  it("an input the workflow's schema refuses is a tool error with the schema's issue, and starts nothing", async () => {
    const r = await call("start_workflow", { workflow: "echo_text", input: "h" });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/^input for workflow "echo_text" is invalid:\n- Too small: expected string to have >=2 characters/);
    expect(t.touched).toEqual([]);
  });

  it("listing the tools and the workflows needs no database", async () => {
    expect((await c.listTools()).tools.map((x) => x.name)).toContain("start_workflow");
    const listed = (await call("list_workflows", {})).structuredContent as { workflows: { name: string; input_schema: unknown }[] };
    expect(listed.workflows).toEqual([expect.objectContaining({ name: "echo_text", input_schema: expect.objectContaining({ type: "string", minLength: 2 }) })]);
    expect(t.touched).toEqual([]);
  });
});
