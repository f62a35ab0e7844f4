/**
 * A workflow's input as an MCP tool's arguments. MCP tool arguments are
 * always a JSON object: a workflow whose zod schema is an object takes the
 * arguments as its input unchanged; any other input (a string, an array, no
 * schema at all) travels in an `input` property.
 *
 * The JSON Schema is generated from the zod schema (zod 4's toJSONSchema, the
 * input side: what a caller sends before transforms and defaults) and cached
 * per workflow, since a Worker builds the MCP server once per request.
 */
import * as z from "zod";
import type { Workflow } from "../../core/definitions.ts";

export type JsonSchemaObject = { type: "object"; properties?: Record<string, object>; required?: string[]; [key: string]: unknown };

const schemas = new WeakMap<Workflow, { input: Record<string, unknown>; schema: JsonSchemaObject; wrapped: boolean }>();

function describe(wf: Workflow): { input: Record<string, unknown>; schema: JsonSchemaObject; wrapped: boolean } {
  let entry = schemas.get(wf);
  if (!entry) {
    const zod = wf.options.input;
    // Parts JSON Schema cannot express (transforms' outputs, dates…) become "any": the zod check still runs on the call.
    const generated = zod ? (z.toJSONSchema(zod, { io: "input", unrepresentable: "any" }) as Record<string, unknown>) : {};
    delete generated.$schema;
    if (generated.type === "object") {
      entry = { input: generated, schema: generated as JsonSchemaObject, wrapped: false };
    } else {
      const optional = !zod || zod.safeParse(undefined).success;
      entry = {
        input: generated,
        schema: { type: "object", properties: { input: generated }, ...(optional ? {} : { required: ["input"] }) },
        wrapped: true,
      };
    }
    schemas.set(wf, entry);
  }
  return entry;
}

/** The JSON Schema of the workflow's input itself (start_workflow's `input`, the HTTP start's `input`); `{}`: any. */
export function inputJsonSchema(wf: Workflow): Record<string, unknown> {
  return describe(wf).input;
}

/** The per-workflow start tool's `inputSchema`: the input's schema when it is an object, else `{ input }` around it. */
export function toolInputSchema(wf: Workflow): JsonSchemaObject {
  return describe(wf).schema;
}

/** The workflow input carried by a tool call's arguments. */
export function inputFromArguments(wf: Workflow, args: Record<string, unknown> | undefined): unknown {
  if (describe(wf).wrapped) return args?.input;
  return args ?? {};
}

/** zod issues as lines an assistant (or a person) can act on: `- amount: Too small: expected number to be >0`. */
export function formatIssues(issues: readonly unknown[]): string {
  return issues
    .map((issue) => {
      const { path, message } = (issue ?? {}) as { path?: unknown; message?: unknown };
      const where = Array.isArray(path) && path.length > 0 ? `${path.map(String).join(".")}: ` : "";
      return `- ${where}${typeof message === "string" ? message : JSON.stringify(issue)}`;
    })
    .join("\n");
}
