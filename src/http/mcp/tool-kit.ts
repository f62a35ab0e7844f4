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
  scope: DispatchScope | undefined;
}

export interface ToolEntry {
  tool: Tool;
  call(args: Record<string, unknown> | undefined, ctx: McpCallContext): Promise<CallToolResult>;
  /** Set on the start tool: what a task-augmented call starts. */
  starts?: Workflow;
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

