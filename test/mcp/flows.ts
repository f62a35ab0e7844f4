// The MCP endpoint end to end with the official SDK client (`Client` +
// `StreamableHTTPClientTransport`) against a real server process: `npm start`
// on Node, `wrangler dev` (workerd). Each test file starts its server with an
// API token and runs these flows through it. Every client is a fresh
// connection: the endpoint is stateless, so nothing may depend on reaching
// the same process, isolate or session twice.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, McpError, type CallToolResult, type Progress } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { summaryToken } from "../../functions/workflows/summarize.ts";
import type { Server } from "../runtime/processes.ts";
import { freshPostgres } from "../support/engine.ts";

export interface McpTarget {
  /** The server's base URL, read when a test runs. */
  base: () => string;
  token: string;
}

type Structured = Record<string, unknown>;

export async function connect(t: McpTarget, token: string | null = t.token): Promise<Client> {
  const client = new Client({ name: "edda-mcp-test", version: "1.0.0" });
  const headers: Record<string, string> = token === null ? {} : { authorization: `Bearer ${token}` };
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", t.base()), { requestInit: { headers } }));
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult & { structuredContent: Structured }> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  return { ...r, structuredContent: (r.structuredContent ?? {}) as Structured };
}

async function start(client: Client, workflow: string, input: unknown): Promise<string> {
  const r = await call(client, "start_workflow", { workflow, input });
  expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
  return r.structuredContent.instance_id as string;
}

/** Poll `instance_status` as an assistant would, until the instance (of `workflow`) has one of `statuses`. */
async function pollStatus(client: Client, workflow: string, id: string, statuses: string[], timeoutMs = 20_000): Promise<Structured> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = (await call(client, "instance_status", { instance_id: id })).structuredContent;
    expect(s.workflow).toBe(workflow);
    if (statuses.includes(s.status as string)) return s;
    if (Date.now() > deadline) throw new Error(`${workflow} ${id} did not reach ${statuses.join("/")} (now ${String(s.status)})`);
    // Honour the server's hint, but keep the test brisk.
    await new Promise((r) => setTimeout(r, Math.min(Number(s.suggested_poll_interval_ms ?? 200), 200)));
  }
}

async function rawMcp(t: McpTarget, body: string, headers: Record<string, string> = {}, method = "POST"): Promise<{ status: number; text: string }> {
  const res = await fetch(new URL("/mcp", t.base()), {
    method,
    headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    ...(method === "POST" ? { body } : {}),
  });
  return { status: res.status, text: await res.text() };
}

async function countInstances(client: Client): Promise<number> {
  let total = 0;
  let cursor: string | undefined;
  do {
    const page = (await call(client, "list_instances", { limit: 100, ...(cursor ? { cursor } : {}) })).structuredContent;
    total += (page.instances as unknown[]).length;
    cursor = (page.next_cursor as string | null) ?? undefined;
  } while (cursor);
  return total;
}

/**
 * The flows against an entry running in a real runtime (`start` spawns it
 * with `env`), on a fresh migrated database with an API token and a secret.
 */
export function mcpFlowsOnRuntime(title: string, name: string, start: (env: Record<string, string>) => Promise<Server>, env: Record<string, string> = {}) {
  const token = `mcp-${name}-token`;
  let server: Server | undefined;
  beforeAll(async () => {
    const { url } = await freshPostgres(`mcp_${name}`);
    server = await start({ DATABASE_URL: url, EDDA_SECRET: `mcp-${name}-secret`, EDDA_API_TOKEN: token, ...env });
  }, 90_000);
  afterAll(async () => server?.stop());
  describe(title, { timeout: 30_000 }, () => {
    mcpFlows({ base: () => server!.url, token });
  });
}

export function mcpFlows(t: McpTarget) {
  it("lists at most 12 generic tools whatever the number of workflows; each workflow's input schema is in list_workflows and edda://workflows", async () => {
    const client = await connect(t);
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name);
    expect(names.length).toBeLessThanOrEqual(12);
    expect(names.sort()).toEqual(
      ["bulk_instances", "cancel_instance", "control_schedule", "instance_result", "instance_status", "instance_why", "list_instances", "list_workflows", "operation_status", "rerun_instance", "send_message", "start_workflow"].sort(),
    );
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    const startTool = byName.get("start_workflow")!;
    expect(startTool.execution?.taskSupport).toBe("optional");
    const workflowEnum = (startTool.inputSchema.properties as Record<string, { enum?: string[] }>).workflow!.enum!;
    expect(workflowEnum.length).toBeGreaterThan(12); // the example app's workflows, all behind one tool
    expect(workflowEnum).toEqual(expect.arrayContaining(["order_saga", "approval", "pipeline", "reminder", "notifier"]));
    for (const name of ["instance_status", "instance_result", "cancel_instance"]) {
      expect(byName.get(name)!.inputSchema).toMatchObject({ type: "object", properties: { instance_id: { type: "string" } }, required: ["instance_id"] });
    }
    expect(byName.get("cancel_instance")!.annotations?.destructiveHint).toBe(true);

    const sagaSchema = {
      type: "object",
      properties: {
        orderId: { type: "string", minLength: 1, description: "The order to fulfil" },
        amount: { type: "number", exclusiveMinimum: 0 },
        failAt: { type: "string", enum: ["payment", "shipping"] },
      },
      required: ["orderId", "amount"],
    };
    const listed = (await call(client, "list_workflows", {})).structuredContent.workflows as { name: string; description: string | null; input_schema: unknown; tools: string[] }[];
    expect(listed.map((w) => w.name).sort()).toEqual([...workflowEnum].sort());
    const saga = listed.find((w) => w.name === "order_saga")!;
    expect(saga.description).toContain("Order saga: reserves stock");
    expect(saga.input_schema).toMatchObject(sagaSchema);
    expect(saga.tools).toEqual([]);
    const resource = JSON.parse(((await client.readResource({ uri: "edda://workflows" })).contents[0] as { text: string }).text) as { workflows: typeof listed };
    expect(resource.workflows).toEqual(listed);
    await client.close();
  });

  it("starts order_saga through start_workflow, polls instance_status to completion and reads instance_result", async () => {
    const client = await connect(t);
    const started = await call(client, "start_workflow", { workflow: "order_saga", input: { orderId: "mcp-o1", amount: 25 } });
    expect(started.isError).toBeFalsy();
    expect(started.structuredContent).toMatchObject({ workflow: "order_saga" });
    const id = started.structuredContent.instance_id as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);

    const done = await pollStatus(client, "order_saga", id, ["completed", "failed"]);
    expect(done).toMatchObject({ instance_id: id, status: "completed", finished: true, completed_activities: 3 });
    expect(done.suggested_poll_interval_ms).toBeUndefined();

    const result = await call(client, "instance_result", { instance_id: id });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ status: "completed", output: { orderId: "mcp-o1", status: "shipped" } });
    const unknown = await call(client, "start_workflow", { workflow: "no_such_workflow", input: {} });
    expect(unknown.isError).toBe(true);
    await client.close();
  });

  it("repair tools: rerun and fork a finished pipeline, a bulk dry run (one status or several) and operation, schedule pause/trigger/resume; refusals are tool errors", async () => {
    const client = await connect(t);
    const id = await start(client, "pipeline", { steps: 2 });
    await pollStatus(client, "pipeline", id, ["completed"]);
    const rerun = await call(client, "rerun_instance", { instance_id: id, request_id: "mcp-r1" });
    expect(rerun.structuredContent).toMatchObject({ created: true, rerun_of: id });
    expect((await call(client, "rerun_instance", { instance_id: id, request_id: "mcp-r1" })).structuredContent).toMatchObject({ created: false, instance_id: rerun.structuredContent.instance_id });
    const badFork = await call(client, "rerun_instance", { instance_id: id, from_activity_id: "no_such:1" });
    expect(badFork.isError).toBe(true);
    const dry = await call(client, "bulk_instances", { workflow: "pipeline", search: id, action: "cancel", dry_run: true });
    expect(dry.structuredContent).toEqual({ dry_run: true, count: 1 });
    const dryOne = await call(client, "bulk_instances", { workflow: "pipeline", status: "completed", search: id, action: "rerun", dry_run: true });
    expect(dryOne.structuredContent).toEqual({ dry_run: true, count: 1 });
    const op = await call(client, "bulk_instances", { workflow: "pipeline", search: "mcp-no-such-text", action: "cancel", request_id: `mcp-b-${id}` });
    expect(op.structuredContent).toMatchObject({ operationId: `bulk-mcp-b-${id}`, total: 0 });
    expect((await call(client, "operation_status", { operation_id: `bulk-mcp-b-${id}` })).isError).toBeFalsy();
    expect((await call(client, "bulk_instances", { workflow: "not_exposed", action: "cancel" })).isError).toBe(true);
    // After the counts: the fork is one more instance the search by id matches.
    const fork = await call(client, "rerun_instance", { instance_id: id, from_activity_id: "pipeline_step:2", request_id: `mcp-f-${id}` });
    expect(fork.isError, JSON.stringify(fork.content)).toBeFalsy();
    expect(fork.structuredContent).toMatchObject({ created: true, fork_of: id });
    expect((await call(client, "control_schedule", { workflow: "daily_report", action: "pause" })).structuredContent.paused_at).not.toBeNull();
    const trig = await call(client, "control_schedule", { workflow: "daily_report", action: "trigger", request_id: `mcp-t-${id}` });
    expect(trig.structuredContent).toMatchObject({ created: true });
    expect((await call(client, "control_schedule", { workflow: "daily_report", action: "resume" })).structuredContent.paused_at).toBeNull();
    await client.close();
  });

  it("a failing order_saga runs its compensations; its result reports the error", async () => {
    const client = await connect(t);
    const id = await start(client, "order_saga", { orderId: "mcp-o2", amount: 5, failAt: "shipping" });
    const failed = await pollStatus(client, "order_saga", id, ["failed", "completed"]);
    expect(failed.status).toBe("failed");
    const result = await call(client, "instance_result", { instance_id: id });
    expect(result.structuredContent).toMatchObject({ status: "failed", error: { error_message: "no carrier available for mcp-o2" } });
    const resource = await client.readResource({ uri: `edda://instances/${id}` });
    const body = JSON.parse((resource.contents[0] as { text: string }).text) as { history: { event_type: string }[] };
    expect(body.history.filter((h) => h.event_type === "CompensationExecuted")).toHaveLength(2); // refund, release
    await client.close();
  });

  it("starts an approval and cancels it through cancel_instance; a second cancel is a tool error", async () => {
    const client = await connect(t);
    const id = await start(client, "approval", { requestId: "mcp-r1", timeoutSeconds: 3600 });
    await pollStatus(client, "approval", id, ["waiting_for_message"]);
    const cancelled = await call(client, "cancel_instance", { instance_id: id });
    expect(cancelled.isError).toBeFalsy();
    expect(["cancelled", "compensating"]).toContain(cancelled.structuredContent.status);
    const status = await pollStatus(client, "approval", id, ["cancelled"]);
    expect(status.finished).toBe(true);
    const result = await call(client, "instance_result", { instance_id: id });
    expect(result.structuredContent).toMatchObject({ status: "cancelled", cancellation: { cancelled_by: "mcp", previous_status: "waiting_for_message" } });
    const again = await call(client, "cancel_instance", { instance_id: id });
    expect(again.isError).toBe(true);
    expect(JSON.stringify(again.content)).toContain("cannot be cancelled");
    await client.close();
  });

  it("send_message delivers an approval decision to one instance, and without instance_id publishes to a broadcast subscriber", async () => {
    const client = await connect(t);
    const approvalId = await start(client, "approval", { requestId: "mcp-r2", timeoutSeconds: 3600 });
    await pollStatus(client, "approval", approvalId, ["waiting_for_message"]);
    const sent = await call(client, "send_message", { instance_id: approvalId, channel: "approval", data: { approved: true, approver: "ada" } });
    expect(sent.isError).toBeFalsy();
    await pollStatus(client, "approval", approvalId, ["completed"]);
    expect((await call(client, "instance_result", { instance_id: approvalId })).structuredContent.output).toEqual({ status: "approved", approver: "ada" });

    const notifierId = await start(client, "notifier", { count: 1 });
    await pollStatus(client, "notifier", notifierId, ["waiting_for_message"]);
    const published = await call(client, "send_message", { channel: "notifications", data: { hello: "mcp" } });
    expect(published.isError).toBeFalsy();
    await pollStatus(client, "notifier", notifierId, ["completed"]);
    expect((await call(client, "instance_result", { instance_id: notifierId })).structuredContent.output).toEqual({ received: [{ hello: "mcp" }] });
    await client.close();
  });

  it("invalid input is a tool error listing the zod issues, and starts nothing", async () => {
    const client = await connect(t);
    const before = await countInstances(client);
    const bad = await call(client, "start_workflow", { workflow: "order_saga", input: { amount: -3, failAt: "weather" } });
    expect(bad.isError).toBe(true);
    const text = (bad.content[0] as { text: string }).text;
    expect(text).toContain('input for workflow "order_saga" is invalid');
    expect(text).toMatch(/- orderId: .*expected string/);
    expect(text).toMatch(/- amount: Too small/);
    expect(text).toMatch(/- failAt: Invalid option/);
    expect((bad.structuredContent.issues as unknown[]).length).toBe(3);
    // The schema it missed comes with the issues, for a client that has not read list_workflows.
    expect(bad.structuredContent.input_schema).toMatchObject({ type: "object", required: ["orderId", "amount"] });

    const badId = await call(client, "instance_status", { instance_id: "no such\u0000id" });
    expect(badId.isError).toBe(true);
    expect((badId.content[0] as { text: string }).text).toContain("instance_id");
    const missing = await call(client, "instance_result", { instance_id: "missing-instance" });
    expect(missing.isError).toBe(true);
    expect((missing.content[0] as { text: string }).text).toContain('instance "missing-instance" not found');
    const extra = await call(client, "send_message", { channel: "x", data: 1, surprise: true });
    expect(extra.isError).toBe(true);
    expect((extra.content[0] as { text: string }).text).toContain("surprise");
    await expect(client.callTool({ name: "no_such_tool", arguments: {} })).rejects.toThrow(/unknown tool "no_such_tool"/);
    expect(await countInstances(client)).toBe(before);
    await client.close();
  });

  it("task flow: start_workflow called as a task; the task id is the instance id, readable and cancellable from any connection", async () => {
    const client = await connect(t);
    const seen: string[] = [];
    let taskId = "";
    let result: CallToolResult | undefined;
    for await (const m of client.experimental.tasks.callToolStream({ name: "start_workflow", arguments: { workflow: "order_saga", input: { orderId: "mcp-task", amount: 7 } } }, undefined, { task: { ttl: 60_000 } })) {
      seen.push(m.type);
      if (m.type === "taskCreated") taskId = m.task.taskId;
      if (m.type === "result") result = m.result as CallToolResult;
      if (m.type === "error") throw m.error;
    }
    expect(seen[0]).toBe("taskCreated");
    expect(seen.at(-1)).toBe("result");
    expect(result?.structuredContent).toMatchObject({ instance_id: taskId, status: "completed", output: { orderId: "mcp-task", status: "shipped" } });
    await client.close();

    // A new connection (another isolate or process in production) knows the task, as an instance too.
    const other = await connect(t);
    const task = await other.experimental.tasks.getTask(taskId);
    expect(task).toMatchObject({ taskId, status: "completed", ttl: null });
    const again = (await other.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as CallToolResult;
    expect(again.structuredContent).toMatchObject({ output: { orderId: "mcp-task", status: "shipped" } });
    expect((await call(other, "instance_status", { instance_id: taskId })).structuredContent.status).toBe("completed");

    // A long approval as a task: created, still working, cancelled through tasks/cancel.
    const created = await other.request(
      { method: "tools/call", params: { name: "start_workflow", arguments: { workflow: "approval", input: { requestId: "mcp-task-r", timeoutSeconds: 3600 } }, task: { ttl: 60_000 } } },
      CreateTaskResultSchema,
    );
    const approvalTask = created.task.taskId;
    expect(created.task.status).toBe("working");
    await pollStatus(other, "approval", approvalTask, ["waiting_for_message"]);
    expect((await other.experimental.tasks.getTask(approvalTask)).pollInterval).toBe(30_000);
    const listed = await other.experimental.tasks.listTasks();
    expect(listed.tasks.map((x) => x.taskId)).toContain(approvalTask);
    const cancelled = await other.experimental.tasks.cancelTask(approvalTask);
    expect(cancelled.status).toBe("cancelled");
    const third = await connect(t);
    expect((await third.experimental.tasks.getTask(approvalTask)).status).toBe("cancelled");
    const outcome = (await third.experimental.tasks.getTaskResult(approvalTask, CallToolResultSchema)) as CallToolResult;
    expect(outcome.isError).toBe(true);
    expect((outcome.structuredContent as Structured).cancellation).toMatchObject({ cancelled_by: "mcp" });
    await expect(third.experimental.tasks.cancelTask(approvalTask)).rejects.toThrow(/terminal status/);
    await expect(third.experimental.tasks.getTask("not-a-task")).rejects.toThrow(/not found/i);
    // Invalid input on a task-augmented call is a JSON-RPC error listing the issues (a task client cannot read a tool error).
    const invalid = third.request(
      { method: "tools/call", params: { name: "start_workflow", arguments: { workflow: "order_saga", input: { orderId: "" } }, task: {} } },
      CreateTaskResultSchema,
    );
    await expect(invalid).rejects.toThrow(/- orderId: Too small[\s\S]*- amount:/);
    await other.close();
    await third.close();
  });

  it("tasks/result with a progress token: the summarize stream as progress notifications in order, then the result", async () => {
    const client = await connect(t);
    const tokens = (n: number) => [...Array.from({ length: n }, (_, i) => summaryToken(i)), "done"];
    // tasks/result asked right after the task was created: the stream is read as it is written (LISTEN or a bounded poll).
    const created = await client.request({ method: "tools/call", params: { name: "start_workflow", arguments: { workflow: "summarize", input: { tokens: 40 } }, task: {} } }, CreateTaskResultSchema);
    const taskId = created.task.taskId;
    const order: string[] = [];
    const progress: Progress[] = [];
    const result = (await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, {
      onprogress: (p) => {
        progress.push(p);
        order.push("progress");
      },
    })) as CallToolResult;
    order.push("result");
    expect(progress.map((p) => p.message)).toEqual(tokens(40));
    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
    expect(order.at(-1)).toBe("result");
    expect(order.indexOf("result")).toBe(41);
    // The handler gets the notification's params (without the token), _meta included.
    const items = progress.map((p) => ((p as { _meta?: Structured })._meta ?? {})["edda-edge/stream-item"] as Structured);
    expect(items[0]).toMatchObject({ kind: "chunk", source: "generate_summary:1", attempt: 1, topic: "tokens", data: summaryToken(0) });
    expect(items.at(-1)).toMatchObject({ kind: "emit", topic: "status", data: "done" });
    const seqs = items.map((i) => i.seq as number);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(41);
    expect(result.structuredContent).toMatchObject({ instance_id: taskId, status: "completed", output: { tokens: 40 } });

    // The SDK's own flow (tasks/get until terminal, then tasks/result), from a new connection: the whole stream, then the result.
    const other = await connect(t);
    const seen: string[] = [];
    for await (const m of other.experimental.tasks.callToolStream({ name: "start_workflow", arguments: { workflow: "summarize", input: { tokens: 12 } } }, undefined, { task: {}, onprogress: (p) => seen.push(`progress ${p.progress}: ${p.message ?? ""}`) })) {
      if (m.type === "error") throw m.error;
      if (m.type === "result") seen.push(`result ${JSON.stringify((m.result as CallToolResult).structuredContent?.output)}`);
    }
    expect(seen).toEqual([...tokens(12).map((tok, i) => `progress ${i + 1}: ${tok}`), `result ${JSON.stringify({ tokens: 12, length: tokens(12).slice(0, 12).join("").length })}`]);
    // Without a token, tasks/result answers with the result alone (plain JSON).
    expect(((await other.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as CallToolResult).structuredContent).toMatchObject({ output: { tokens: 40 } });

    // A client that goes away while its tasks/result waits on a waiting instance: the server lets go, and keeps answering.
    const approvalId = await start(other, "approval", { requestId: "mcp-progress-gone", timeoutSeconds: 3600 });
    await pollStatus(other, "approval", approvalId, ["waiting_for_message"]);
    const gone = new AbortController();
    const held = fetch(new URL("/mcp", t.base()), {
      method: "POST",
      headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tasks/result", params: { taskId: approvalId, _meta: { progressToken: "gone" } } }),
      signal: gone.signal,
    }).then(async (r) => (await r.text(), r.status));
    await new Promise((r) => setTimeout(r, 500));
    gone.abort();
    await expect(held).rejects.toThrow(/abort/i);
    expect((await call(other, "cancel_instance", { instance_id: approvalId })).isError).toBeFalsy();
    const cancelled = (await other.experimental.tasks.getTaskResult(approvalId, CallToolResultSchema, { onprogress: () => undefined })) as CallToolResult;
    expect(cancelled.isError).toBe(true);
    expect(cancelled.structuredContent).toMatchObject({ instance_id: approvalId, status: "cancelled" });
    await client.close();
    await other.close();
  });

  it("instances and the workflow list are resources; an unknown instance is a resource-not-found error", async () => {
    const client = await connect(t);
    const id = await start(client, "reminder", { seconds: 3600 });
    await pollStatus(client, "reminder", id, ["waiting_for_timer"]);
    const templates = await client.listResourceTemplates();
    expect(templates.resourceTemplates.map((r) => r.uriTemplate)).toContain("edda://instances/{instance_id}");
    const listed = await client.listResources();
    expect(listed.resources.map((r) => r.uri)).toEqual(expect.arrayContaining(["edda://workflows", `edda://instances/${id}`]));
    const read = await client.readResource({ uri: `edda://instances/${id}` });
    const body = JSON.parse((read.contents[0] as { text: string }).text) as Structured;
    expect(body).toMatchObject({ instance_id: id, workflow: "reminder", status: "waiting_for_timer", input: { seconds: 3600 }, history_length: 0, suggested_poll_interval_ms: 5000 });
    const wfs = JSON.parse(((await client.readResource({ uri: "edda://workflows" })).contents[0] as { text: string }).text) as { workflows: { name: string; input_schema: unknown }[] };
    expect(wfs.workflows.find((w) => w.name === "reminder")?.input_schema).toMatchObject({ type: "object", properties: { seconds: { type: "number" } } });
    const unknown = client.readResource({ uri: "edda://instances/nope" });
    await expect(unknown).rejects.toBeInstanceOf(McpError);
    await expect(client.readResource({ uri: "edda://instances/%E0%A4%A" })).rejects.toMatchObject({ code: -32002 });
    await call(client, "cancel_instance", { instance_id: id });
    await client.close();
  });

  it("unauthenticated and wrongly authenticated calls are refused when a token is set", async () => {
    await expect(connect(t, null)).rejects.toThrow(/401|Unauthorized|bearer/i);
    await expect(connect(t, "wrong-token")).rejects.toThrow(/401|Unauthorized|bearer/i);
    const res = await fetch(new URL("/mcp", t.base()), {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "start_workflow", arguments: { workflow: "order_saga", input: { orderId: "sneaky", amount: 1 } } } }),
    });
    expect(res.status).toBe(401);
    await res.text();
    const client = await connect(t);
    const list = (await call(client, "list_instances", { workflow: "order_saga", limit: 100 })).structuredContent.instances as { instance_id: string }[];
    const inputs = await Promise.all(list.map(async (i) => (await client.readResource({ uri: `edda://instances/${i.instance_id}` })).contents[0] as { text: string }));
    expect(inputs.some((c) => c.text.includes("sneaky"))).toBe(false);
    await client.close();
  });

  it("hostile requests to /mcp get clear errors and leave the server working, with nothing started", async () => {
    const client = await connect(t);
    const before = await countInstances(client);
    const init = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "start_workflow", arguments: { workflow: "order_saga", input: { orderId: "h", amount: 1 } } } };
    const cases: [string, Promise<{ status: number; text: string }>, number][] = [
      ["not JSON", rawMcp(t, "{ nope"), 400],
      ["deep nesting", rawMcp(t, "[".repeat(5000) + "]".repeat(5000)), 400],
      ["not JSON-RPC", rawMcp(t, JSON.stringify({ hello: "world" })), 400],
      ["wrong content type", rawMcp(t, JSON.stringify(init), { "content-type": "text/plain" }), 415],
      ["no event-stream in Accept", rawMcp(t, JSON.stringify(init), { accept: "application/json" }), 406],
      ["cross-site origin", rawMcp(t, JSON.stringify(init), { origin: "https://evil.example" }), 403],
      ["GET (no standalone stream)", rawMcp(t, "", {}, "GET"), 405],
      ["DELETE (no session)", rawMcp(t, "", {}, "DELETE"), 405],
      ["over the body limit", rawMcp(t, JSON.stringify({ ...init, pad: "x".repeat(1_100_000) })), 413],
    ];
    for (const [what, response, status] of cases) {
      const r = await response;
      expect(r.status, `${what}: ${r.text}`).toBe(status);
      expect(r.text, what).not.toMatch(/at .*\.(ts|js):\d+/); // never a stack
    }
    // Valid JSON-RPC with hostile parameters: protocol or tool errors, never a crash.
    const odd = await rawMcp(t, JSON.stringify([{ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "instance_status", arguments: { instance_id: ["x"] } } }, { jsonrpc: "2.0", id: 3, method: "tasks/get", params: { taskId: "\u0000" } }, { jsonrpc: "2.0", id: 4, method: "resources/read", params: { uri: "edda://instances/a%00b" } }, { jsonrpc: "2.0", id: 5, method: "no/such/method" }]));
    expect(odd.status).toBe(200);
    const replies = JSON.parse(odd.text) as { id: number; result?: { isError?: boolean }; error?: { code: number; message: string } }[];
    expect(replies.find((r) => r.id === 2)?.result?.isError).toBe(true);
    expect(replies.find((r) => r.id === 3)?.error?.code).toBe(-32602);
    expect(replies.find((r) => r.id === 4)?.error?.code).toBe(-32002);
    expect(replies.find((r) => r.id === 5)?.error?.code).toBe(-32601);
    expect(JSON.stringify(replies)).not.toMatch(/postgres|SQLSTATE|invalid byte sequence/i);

    // State after: nothing was started, and a normal run still goes through.
    expect(await countInstances(client)).toBe(before);
    const id = await start(client, "order_saga", { orderId: "after-hostile", amount: 2 });
    expect((await pollStatus(client, "order_saga", id, ["completed", "failed"])).status).toBe("completed");
    const health = await fetch(new URL("/healthz", t.base()));
    expect(health.status).toBe(200);
    await health.text();
    await client.close();
  });
}
