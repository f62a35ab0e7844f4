/**
 * The per-workflow MCP tools, by opt-in (`mcp({ tools: "per-workflow" })` or a
 * list of names): four per workflow, as Edda names them — `{name}` (start;
 * its arguments are the workflow's input, so the tool's schema is the
 * workflow's), `{name}_status`, `{name}_result`, `{name}_cancel`. They answer
 * as the generic tools do (tools.ts) and only for instances of their workflow.
 */
import * as z from "zod";
import type { Workflow } from "../../core/definitions.ts";
import { inputFromArguments, toolInputSchema } from "./schema.ts";
import { exposedInstance, instanceId, jsonSchemaOf, parseArgs, type ToolEntry } from "./tool-kit.ts";
import { jsonResult, outcome, summarize } from "./views.ts";

const instanceArgs = z.object({ instance_id: instanceId }).strict();
const INSTANCE_ARGS_SCHEMA = jsonSchemaOf(instanceArgs);

export function workflowTools(wf: Workflow): [string, ToolEntry][] {
  const name = wf.workflowName;
  const about = wf.options.description ? `${wf.options.description.trim()}\n\n` : "";
  return [
    [
      name,
      {
        starts: (args) => ({ wf, input: inputFromArguments(wf, args) }),
        tool: {
          name,
          description: `${about}Starts the durable workflow "${name}" and returns its instance_id at once; the run continues on the server (it may wait for timers or messages for days). Follow it with ${name}_status (or instance_status) and collect the outcome with ${name}_result. Clients that support MCP tasks may call this tool as a task instead.`,
          inputSchema: toolInputSchema(wf),
          execution: { taskSupport: "optional" },
          annotations: { title: `Start ${name}`, readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
        },
        async call(args, ctx) {
          const r = await ctx.engine.start(wf, inputFromArguments(wf, args), {}, ctx.scope);
          return jsonResult(
            { instance_id: r.instanceId, workflow: name, status: r.status },
            false,
            `Started ${name} instance ${r.instanceId}. Poll ${name}_status with { "instance_id": "${r.instanceId}" }.`,
          );
        },
      },
    ],
    [
      `${name}_status`,
      {
        tool: {
          name: `${name}_status`,
          description: `Status of a ${name} instance: its status, how many activities completed, the activity it is at, and a suggested interval before polling again.`,
          inputSchema: INSTANCE_ARGS_SCHEMA,
          annotations: { title: `${name} status`, readOnlyHint: true, openWorldHint: false },
        },
        async call(args, ctx) {
          const { instance_id } = parseArgs(instanceArgs, args, `${name}_status`);
          const found = await exposedInstance(ctx, instance_id, wf);
          return jsonResult({ ...summarize(found.view, found.completed) });
        },
      },
    ],
    [
      `${name}_result`,
      {
        tool: {
          name: `${name}_result`,
          description: `The outcome of a ${name} instance: its output when completed, the error when failed, the cancellation when cancelled; while it runs, its status and when to ask again.`,
          inputSchema: INSTANCE_ARGS_SCHEMA,
          annotations: { title: `${name} result`, readOnlyHint: true, openWorldHint: false },
        },
        async call(args, ctx) {
          const { instance_id } = parseArgs(instanceArgs, args, `${name}_result`);
          return outcome((await exposedInstance(ctx, instance_id, wf)).view, false);
        },
      },
    ],
    [
      `${name}_cancel`,
      {
        tool: {
          name: `${name}_cancel`,
          description: `Cancels a running or waiting ${name} instance. The compensations it registered run (newest first) before it ends cancelled.`,
          inputSchema: INSTANCE_ARGS_SCHEMA,
          annotations: { title: `Cancel ${name}`, readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
        },
        async call(args, ctx) {
          const { instance_id } = parseArgs(instanceArgs, args, `${name}_cancel`);
          await exposedInstance(ctx, instance_id, wf);
          const r = await ctx.engine.cancel(instance_id, "mcp", ctx.scope);
          const note = r.status === "compensating" ? "compensations are running" : "cancelled";
          return jsonResult({ instance_id, workflow: name, status: r.status }, false, `Cancelled ${name} instance ${instance_id}: ${note}.`);
        },
      },
    ],
  ];
}
