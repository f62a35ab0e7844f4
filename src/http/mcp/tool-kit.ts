/**
 * What every MCP tool module shares: the call context, a tool table entry,
 * argument parsing and the exposed-instance check. A module of its own so the
 * tool modules (tools.ts, repair-tools.ts) import it and never each other.
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";
import type { Workflow } from "../../core/definitions.ts";
import { NotFoundError, ValidationError } from "../../core/errors.ts";
import type { DispatchScope } from "../../engine/dispatcher.ts";
import type { Engine } from "../../engine/engine.ts";
import { loadInstance } from "./views.ts";

export interface McpCallContext {
  engine: Engine;
  /** Exposed workflows by name: instances of any other workflow do not exist for MCP clients. */
  exposed: ReadonlyMap<string, Workflow>;
  /** The exposed workflows that also have tools of their own (`mcp({ tools })`): `{name}`, `{name}_status`, … */
  perWorkflow: ReadonlySet<string>;
  scope: DispatchScope | undefined;
}

export interface ToolEntry {
  tool: Tool;
  call(args: Record<string, unknown> | undefined, ctx: McpCallContext): Promise<CallToolResult>;
  /** Set on a start tool: the workflow and input a task-augmented call with these arguments starts (ValidationError when they name none). */
  starts?: (args: Record<string, unknown> | undefined, ctx: McpCallContext) => { wf: Workflow; input: unknown };
}

export const instanceId = z.string().regex(/^[A-Za-z0-9_.:-]{1,200}$/, "an instance id is 1–200 characters of A-Z a-z 0-9 _ . : -");

type Hints = { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean };

/** One tool from its name, title, description, zod arguments and call: the arguments are checked (ValidationError) before `call` runs. */
export function tool<S extends z.ZodType>(name: string, title: string, description: string, schema: S, hints: Hints, call: (a: z.output<S>, ctx: McpCallContext) => Promise<CallToolResult>, extra: Partial<Pick<ToolEntry, "starts">> & Pick<Tool, "execution"> = {}): [string, ToolEntry] {
  const { starts, execution } = extra;
  return [
    name,
    {
      tool: { name, description, inputSchema: jsonSchemaOf(schema), ...(execution ? { execution } : {}), annotations: { title, openWorldHint: false, ...hints } },
      call: (args, ctx) => call(parseArgs(schema, args, name), ctx),
      ...(starts ? { starts } : {}),
    },
  ];
}

export function jsonSchemaOf(schema: z.ZodType): Tool["inputSchema"] {
  const s = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
  delete s.$schema;
  return s as Tool["inputSchema"];
}

export function parseArgs<T extends z.ZodType>(schema: T, args: unknown, tool: string): z.output<T> {
  const r = schema.safeParse(args ?? {});
  if (!r.success) throw new ValidationError(`arguments for ${tool} are invalid`, r.error.issues);
  return r.data;
}

/** An instance of an exposed workflow (of `wf` when given), or NotFoundError. */
export async function exposedInstance(ctx: McpCallContext, instanceId: string, wf?: Workflow) {
  const found = await loadInstance(ctx.engine, instanceId);
  if (!found || !ctx.exposed.has(found.view.workflowName)) throw new NotFoundError(`instance "${instanceId}" not found`);
  if (wf && found.view.workflowName !== wf.workflowName) {
    throw new NotFoundError(`instance "${instanceId}" is a ${found.view.workflowName} instance, not ${wf.workflowName}`);
  }
  return found;
}

