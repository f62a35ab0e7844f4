/**
 * The MCP server for one request: the SDK's low-level `Server` with Edda's
 * tools, resources and task store. It is built per request (stateless
 * transport) from the request's engine; it holds nothing between requests.
 *
 * The low-level server, not `McpServer`: the tool set is derived from the
 * registered workflows and their zod schemas at run time, and a workflow tool
 * must answer at once with an instance id when called plainly and with a task
 * when called as one — `McpServer` would block a plain call of a
 * task-capable tool until the task ends.
 */
import { Server } from "@modelcontextprotocol/sdk/server";
import {
  CallToolRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { EddaError, ValidationError } from "../../core/errors.ts";
import { isDataException } from "../problem.ts";
import { taskResult } from "./progress.ts";
import { InstanceTaskStore } from "./tasks.ts";
import { toToolError, type McpCallContext, type ToolEntry } from "./tools.ts";
import { instanceTemplate, listResources, readResource } from "./resources.ts";
import { formatIssues } from "./schema.ts";

const INSTRUCTIONS =
  "start_workflow starts a durable workflow by name with its input (list_workflows gives each one's input schema) and " +
  "returns its instance_id at once; the run continues on the server and may wait for timers or messages for a long time. " +
  "Follow it with instance_status (mind suggested_poll_interval_ms), read the outcome with instance_result, stop it with " +
  "cancel_instance (its compensations run); send_message delivers what a waiting instance waits for. " +
  "start_workflow may also be called as an MCP task: the task id is the instance id; tasks/result with a progressToken " +
  "sends the instance's stream (tokens, progress) as progress notifications before the result. " +
  "Instances are readable as resources at edda://instances/{instance_id}, the workflows at edda://workflows.";

// The SDK's validator only serves elicitation, which these tools never use; one instance, not one per request.
let validator: AjvJsonSchemaValidator | undefined;

export function createMcpServer(ctx: McpCallContext, tools: ReadonlyMap<string, ToolEntry>, info: { name: string; version: string }): Server {
  const store = guarded(new InstanceTaskStore(ctx, tools));
  const server = new Server(info, {
    capabilities: {
      tools: {},
      resources: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    instructions: INSTRUCTIONS,
    taskStore: store,
    jsonSchemaValidator: (validator ??= new AjvJsonSchemaValidator()),
  });

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools.values()].map((t) => t.tool) }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const entry = tools.get(request.params.name);
    if (!entry) throw new McpError(ErrorCode.InvalidParams, `unknown tool "${request.params.name}"`);
    if (request.params.task) {
      // A task-augmented call answers with the task or a JSON-RPC error: a client waiting for a task cannot read a tool error.
      if (!entry.starts || !extra.taskStore) throw new McpError(ErrorCode.MethodNotFound, `tool "${request.params.name}" cannot run as a task`);
      try {
        return { task: await extra.taskStore.createTask({}) };
      } catch (err) {
        if (err instanceof ValidationError) throw new McpError(ErrorCode.InvalidParams, `${err.message}:\n${formatIssues(err.issues)}`, { issues: err.issues });
        throw err;
      }
    }
    try {
      return await entry.call(request.params.arguments, ctx);
    } catch (err) {
      return toToolError(err);
    }
  });

  // In place of the SDK's tasks/result: the same wait, and the instance's stream as progress (progress.ts).
  server.setRequestHandler(GetTaskPayloadRequestSchema, (request, extra) => taskResult(ctx, store, request.params.taskId, extra).catch(rethrowSafely));

  server.setRequestHandler(ListResourcesRequestSchema, (request) => listResources(ctx, request.params?.cursor).catch(rethrowSafely));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: [instanceTemplate] }));
  server.setRequestHandler(ReadResourceRequestSchema, (request) => readResource(ctx, request.params.uri).catch(rethrowSafely));
  return server;
}

/**
 * The SDK sends a handler's error message to the client: a failure that is
 * not Edda's own (not found, not cancellable, invalid input: what the caller
 * can fix) becomes a generic internal error, logged here, never a driver's
 * message.
 */
function rethrowSafely(err: unknown): never {
  if (err instanceof McpError || err instanceof EddaError) throw err;
  if (isDataException(err)) throw new McpError(ErrorCode.InvalidParams, "a value in the request is not acceptable");
  console.error("edda: MCP request failed", err);
  throw new McpError(ErrorCode.InternalError, "internal error");
}

/** The task store with every method's failures passed through rethrowSafely (the SDK calls it from its own handlers). */
function guarded<T extends object>(store: T): T {
  return new Proxy(store, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args).catch(rethrowSafely);
    },
  });
}
