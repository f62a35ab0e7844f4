/**
 * MCP resources: `edda://workflows` (the exposed workflows, their input
 * schemas — start_workflow's `input` — and their own tools' names, if any) and one resource per instance,
 * `edda://instances/{instance_id}` (a resource template), with its status,
 * input, outcome and a history summary (event kinds, no payloads).
 * resources/list pages through the instances newest first.
 */
import { McpError, type ListResourcesResult, type ReadResourceResult, type Resource, type ResourceTemplate } from "@modelcontextprotocol/sdk/types.js";
import { workflowListing, type McpCallContext } from "./tools.ts";
import { isInstanceId, loadInstance, summarize } from "./views.ts";

/** The code the MCP specification gives an unknown resource. */
const RESOURCE_NOT_FOUND = -32002;
const WORKFLOWS_URI = "edda://workflows";
const INSTANCE_PREFIX = "edda://instances/";
const HISTORY_SHOWN = 200;

export const instanceTemplate: ResourceTemplate = {
  uriTemplate: `${INSTANCE_PREFIX}{instance_id}`,
  name: "instance",
  title: "Workflow instance",
  description: "A workflow instance: status, input, output or error, completed activity count and a summary of its history.",
  mimeType: "application/json",
};

const workflowsResource: Resource = {
  uri: WORKFLOWS_URI,
  name: "workflows",
  title: "Workflows",
  description: "The workflows start_workflow starts, with their input schemas.",
  mimeType: "application/json",
};

export async function listResources(ctx: McpCallContext, cursor: string | undefined): Promise<ListResourcesResult> {
  const page = await ctx.engine.findInstances({ limit: 50, ...(cursor ? { cursor } : {}) });
  const instances: Resource[] = page.instances
    .filter((i) => ctx.exposed.has(i.workflowName))
    .map((i) => ({ uri: `${INSTANCE_PREFIX}${i.instanceId}`, name: i.instanceId, title: `${i.workflowName} ${i.instanceId} (${i.status})`, mimeType: "application/json" }));
  return { resources: [...(cursor ? [] : [workflowsResource]), ...instances], ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
}

export async function readResource(ctx: McpCallContext, uri: string): Promise<ReadResourceResult> {
  if (uri === WORKFLOWS_URI) {
    return json(uri, { workflows: workflowListing(ctx) });
  }
  if (uri.startsWith(INSTANCE_PREFIX)) {
    const id = safeDecode(uri.slice(INSTANCE_PREFIX.length));
    const found = id !== null && isInstanceId(id) ? await loadInstance(ctx.engine, id) : null;
    if (found && ctx.exposed.has(found.view.workflowName)) {
      const { view, history, completed } = found;
      return json(uri, {
        ...summarize(view, completed),
        input: view.input,
        output: view.output,
        error: view.error,
        cancellation: view.cancellation,
        history_length: history.length,
        // The newest entries: a long-lived instance's history can be long.
        history: history.slice(-HISTORY_SHOWN),
      });
    }
  }
  throw new McpError(RESOURCE_NOT_FOUND, `resource not found: ${uri}`, { uri });
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

function json(uri: string, data: unknown): ReadResourceResult {
  return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(data, null, 2) }] };
}
