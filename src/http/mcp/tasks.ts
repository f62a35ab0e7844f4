/**
 * MCP tasks over workflow instances. A task-augmented call of a start tool
 * (start_workflow, or a workflow's own)
 * starts an instance, and the task *is* the instance: the task id is the
 * instance id, tasks/get reads the instance's status, tasks/result its
 * outcome, tasks/cancel cancels it (running its compensations). Nothing is
 * kept in memory, so any replica — another Worker isolate, a Deno isolate, a
 * restarted Node process — answers for any task, for as long as Edda keeps
 * the instance (its retention is the task's lifetime, hence `ttl: null`).
 */
import type { CreateTaskOptions, TaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { ErrorCode, McpError, type Request, type RequestId, type Result, type Task } from "@modelcontextprotocol/sdk/types.js";
import { NotFoundError } from "../../core/errors.ts";
import type { McpCallContext, ToolEntry } from "./tools.ts";
import { isFinished, isInstanceId, outcome, toTask } from "./views.ts";

export class InstanceTaskStore implements TaskStore {
  constructor(
    private readonly ctx: McpCallContext,
    private readonly tools: ReadonlyMap<string, ToolEntry>,
  ) {}

  /** Called for a task-augmented `tools/call` of a start tool: start the instance, answer with it as a task. */
  async createTask(_params: CreateTaskOptions, _requestId: RequestId, request: Request): Promise<Task> {
    const params = (request.params ?? {}) as { name?: unknown; arguments?: Record<string, unknown> };
    const starts = typeof params.name === "string" ? this.tools.get(params.name)?.starts : undefined;
    if (!starts) throw new McpError(ErrorCode.MethodNotFound, `tool "${String(params.name)}" cannot run as a task`);
    const { wf, input } = starts(params.arguments, this.ctx);
    const r = await this.ctx.engine.start(wf, input, {}, this.ctx.scope);
    const view = await this.ctx.engine.getInstance(r.instanceId);
    if (!view) throw new NotFoundError(`instance "${r.instanceId}" not found`);
    return toTask(view);
  }

  async getTask(taskId: string): Promise<Task | null> {
    const view = await this.view(taskId);
    return view ? toTask(view) : null;
  }

  /** The outcome is the workflow's: finished tasks answer with it; failed and cancelled runs as tool errors. */
  async getTaskResult(taskId: string): Promise<Result> {
    const view = await this.view(taskId);
    if (!view) throw new McpError(ErrorCode.InvalidParams, `task "${taskId}" not found`);
    return outcome(view, true);
  }

  /** Only cancellation comes from outside; every other status change is the workflow's own. */
  async updateTaskStatus(taskId: string, status: Task["status"]): Promise<void> {
    if (status !== "cancelled") throw new McpError(ErrorCode.InvalidRequest, `a workflow task's status is set by the workflow, not to "${status}" by a client`);
    const view = await this.view(taskId);
    if (!view) throw new McpError(ErrorCode.InvalidParams, `task "${taskId}" not found`);
    if (isFinished(view.status)) return;
    await this.ctx.engine.cancel(taskId, "mcp", this.ctx.scope);
  }

  async storeTaskResult(): Promise<void> {
    throw new McpError(ErrorCode.InvalidRequest, "a workflow task's result is its instance's output; it cannot be stored from outside");
  }

  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const page = await this.ctx.engine.findInstances({ limit: 50, ...(cursor ? { cursor } : {}) });
    return {
      tasks: page.instances.filter((i) => this.ctx.exposed.has(i.workflowName)).map(toTask),
      ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
    };
  }

  private async view(taskId: string) {
    if (!isInstanceId(taskId)) return null;
    const view = await this.ctx.engine.getInstance(taskId);
    return view && this.ctx.exposed.has(view.workflowName) ? view : null;
  }
}
