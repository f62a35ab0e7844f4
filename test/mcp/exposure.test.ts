// Which workflows the MCP endpoint serves, which tools it lists (a fixed set by
// default, per-workflow ones by opt-in), and how inputs become tool arguments:
// the official client in process, its transport's fetch wired to app.fetch (no
// server), on PGlite. The `mcp` option's refusals when the app is built, and
// no /mcp without it, are in options.unit.test.ts (no database).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import fc from "fast-check";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workflow } from "../../src/index.ts";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import type { Database } from "../../src/storage/database.ts";
import { mcp } from "../../src/mcp.ts";

const echoText = workflow("echo_text", { input: z.string().min(2), description: "Returns its text." }, async (_ctx, text) => ({ text }));
const noSchema = workflow("no_schema", async (_ctx, input: unknown) => ({ got: input }));

let database: Database;
let exposed: TestApp;
let many: TestApp;

/** 40 workflows: the default tool list does not grow with them. */
const manyWorkflows = Array.from({ length: 40 }, (_, i) => workflow(`many_${i}`, { input: z.object({ n: z.number() }) }, async (_ctx, { n }) => n + i));

function client(t: TestApp): Promise<Client> {
  const c = new Client({ name: "exposure-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("http://edda.test/mcp"), { fetch: (url, init) => t.edda.fetch(new Request(url, init)) });
  return c.connect(transport).then(() => c);
}

const structured = (r: unknown) => (r as CallToolResult).structuredContent as Record<string, unknown>;

beforeAll(async () => {
  database = await openTestDatabase("pglite", "mcp_exposure");
  exposed = makeTestApp(database, { workflows: [orderSaga, pipeline, echoText, noSchema], mcp: mcp({ workflows: ["order_saga", "echo_text", "no_schema"], tools: "per-workflow" }), allowedHosts: ["edda.test"] });
  many = makeTestApp(database, { workflows: manyWorkflows, mcp: mcp(), allowedHosts: ["edda.test"] });
});
afterAll(async () => {
  await exposed.edda.close();
  await many.edda.close();
  await database.close();
});

describe("mcp: the default tools", () => {
  it("are the same 12 whatever the number of workflows; start_workflow names them all and starts any", async () => {
    const c = await client(many);
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      ["bulk_instances", "cancel_instance", "control_schedule", "instance_result", "instance_status", "instance_why", "list_instances", "list_workflows", "operation_status", "rerun_instance", "send_message", "start_workflow"].sort(),
    );
    const start = tools.find((t) => t.name === "start_workflow")!;
    expect((start.inputSchema.properties as Record<string, { enum?: string[] }>).workflow!.enum).toHaveLength(40);
    const started = structured(await c.callTool({ name: "start_workflow", arguments: { workflow: "many_39", input: { n: 3 } } }));
    expect((await many.waitFor(started.instance_id as string)).output).toBe(42);
    const listed = structured(await c.callTool({ name: "list_workflows", arguments: {} })).workflows as { name: string; input_schema: unknown }[];
    expect(listed).toHaveLength(40);
    expect(listed[0]!.input_schema).toMatchObject({ type: "object", properties: { n: { type: "number" } }, required: ["n"] });
    await c.close();
  });
});

describe("mcp: a list of workflows, with per-workflow tools", () => {
  it("serves only the listed workflows' tools; instances of the others do not exist for MCP clients", async () => {
    const c = await client(exposed);
    const names = (await c.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["order_saga", "order_saga_status", "echo_text_cancel", "no_schema_result", "list_instances", "start_workflow"]));
    expect(names.filter((n) => n.startsWith("pipeline"))).toEqual([]);
    expect(names).toHaveLength(12 + 3 * 4);

    const { instanceId } = await exposed.edda.start(pipeline, { steps: 1 });
    await exposed.waitFor(instanceId);
    const status = (await c.callTool({ name: "order_saga_status", arguments: { instance_id: instanceId } })) as CallToolResult;
    expect(status.isError).toBe(true);
    expect(JSON.stringify(status.content)).toContain("not found");
    const listed = structured(await c.callTool({ name: "list_instances", arguments: {} })).instances as { instance_id: string }[];
    expect(listed.map((i) => i.instance_id)).not.toContain(instanceId);
    const byWorkflow = (await c.callTool({ name: "list_instances", arguments: { workflow: "pipeline" } })) as CallToolResult;
    expect(byWorkflow.isError).toBe(true);
    await expect(c.experimental.tasks.getTask(instanceId)).rejects.toThrow(/not found/i);
    await expect(c.readResource({ uri: `edda://instances/${instanceId}` })).rejects.toMatchObject({ code: -32002 });
    await expect(c.callTool({ name: "send_message", arguments: { instance_id: instanceId, channel: "x" } })).resolves.toMatchObject({ isError: true });
    await expect(c.callTool({ name: "instance_status", arguments: { instance_id: instanceId } })).resolves.toMatchObject({ isError: true });
    await expect(c.callTool({ name: "start_workflow", arguments: { workflow: "pipeline", input: { steps: 1 } } })).resolves.toMatchObject({ isError: true });
    await c.close();
  });

  it("instance_why says why a served instance is where it is; for an instance of another workflow it is not found", async () => {
    const c = await client(exposed);
    const done = await exposed.edda.start(orderSaga, { orderId: "why-1", amount: 5 });
    await exposed.waitFor(done.instanceId);
    const r = (await c.callTool({ name: "instance_why", arguments: { instance_id: done.instanceId } })) as CallToolResult;
    expect(r.isError).toBeFalsy();
    expect(structured(r)).toMatchObject({ instance_id: done.instanceId, status: "completed", reason: { kind: "none", facts: { status: "completed" } } });
    expect((r.content[0] as { text: string }).text).toContain(`${done.instanceId} completed: none: finished completed`);
    const hidden = await exposed.edda.start(pipeline, { steps: 1 });
    const refused = (await c.callTool({ name: "instance_why", arguments: { instance_id: hidden.instanceId } })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(structured(refused)).toMatchObject({ error_type: "NotFoundError" });
    const bad = (await c.callTool({ name: "instance_why", arguments: { instance_id: "a b" } })) as CallToolResult;
    expect(bad.isError).toBe(true);
  });

  it("a workflow's own tools answer only for its instances; the generic ones for any served instance", async () => {
    const c = await client(exposed);
    const echo = structured(await c.callTool({ name: "echo_text", arguments: { input: "hello" } }));
    const id = echo.instance_id as string;
    await exposed.waitFor(id);
    const foreign = (await c.callTool({ name: "order_saga_status", arguments: { instance_id: id } })) as CallToolResult;
    expect(foreign.isError).toBe(true);
    expect(JSON.stringify(foreign.content)).toContain("is a echo_text instance, not order_saga");
    expect(structured(await c.callTool({ name: "instance_status", arguments: { instance_id: id } }))).toMatchObject({ workflow: "echo_text", status: "completed" });
    const listed = structured(await c.callTool({ name: "list_workflows", arguments: {} })).workflows as { name: string; tools: string[] }[];
    expect(listed.find((w) => w.name === "echo_text")?.tools).toEqual(["echo_text", "echo_text_status", "echo_text_result", "echo_text_cancel"]);
    await c.close();
  });

  it("a non-object input travels in an `input` argument; a workflow without a schema takes any `input`", async () => {
    const c = await client(exposed);
    const tools = new Map((await c.listTools()).tools.map((t) => [t.name, t]));
    expect(tools.get("echo_text")!.inputSchema).toEqual({ type: "object", properties: { input: { type: "string", minLength: 2 } }, required: ["input"] });
    expect(tools.get("echo_text")!.description).toMatch(/^Returns its text\./);
    expect(tools.get("no_schema")!.inputSchema).toEqual({ type: "object", properties: { input: {} } });

    const echo = structured(await c.callTool({ name: "echo_text", arguments: { input: "hello" } }));
    expect((await exposed.waitFor(echo.instance_id as string)).output).toEqual({ text: "hello" });
    const short = (await c.callTool({ name: "echo_text", arguments: { input: "h" } })) as CallToolResult;
    expect(short.isError).toBe(true);
    expect((short.content[0] as { text: string }).text).toMatch(/- Too small/);
    const any = structured(await c.callTool({ name: "no_schema", arguments: { input: [1, { two: 2 }] } }));
    expect((await exposed.waitFor(any.instance_id as string)).output).toEqual({ got: [1, { two: 2 }] });
    await c.close();
  });
});

describe("the start tool and the HTTP API", () => {
  it("agree on which inputs are valid and on the issues they report (property)", { timeout: 120_000 }, async () => {
    const c = await client(exposed);
    const field = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
    const input = fc.record(
      {
        orderId: field(fc.oneof(fc.string({ maxLength: 4 }), fc.integer(), fc.constant(null))),
        amount: field(fc.oneof(fc.double({ noNaN: true, min: -10, max: 10 }), fc.string({ maxLength: 2 }))),
        failAt: field(fc.constantFrom("payment", "shipping", "weather", 3)),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(input, async (args) => {
        const viaMcp = (await c.callTool({ name: "start_workflow", arguments: { workflow: "order_saga", input: args } })) as CallToolResult;
        const viaApi = await exposed.edda.app.request("/workflows/order_saga/instances", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ input: args }),
        });
        const apiBody = (await viaApi.json()) as { issues?: { path: unknown[]; message: string }[] };
        expect(viaMcp.isError === true, JSON.stringify(args)).toBe(viaApi.status === 422);
        if (viaApi.status === 422) {
          const mcpIssues = (viaMcp.structuredContent as { issues: { path: unknown[]; message: string }[] }).issues;
          expect(mcpIssues.map((i) => [i.path, i.message])).toEqual(apiBody.issues!.map((i) => [i.path, i.message]));
        } else {
          expect(viaApi.status).toBe(201);
        }
      }),
      { numRuns: 40 },
    );
    await c.close();
  });
});
