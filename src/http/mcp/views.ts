/**
 * What the MCP surface says about an instance, in one place: the status
 * summary (`instance_status`, `{name}_status`, tasks/get, the instance resource), the outcome
 * (`instance_result`, `{name}_result`, tasks/result) and how an instance status reads as an MCP
 * task status. Keys are snake_case, as Edda's MCP tools have them.
 */
import type { CallToolResult, Task } from "@modelcontextprotocol/sdk/types.js";
import { EV, waitKindOf } from "../../core/model.ts";
import type { Engine, InstanceView } from "../../engine/engine.ts";
import type { InstanceStatus } from "../../core/model.ts";

/** The engine's rule for instance ids; anything else names no instance (and never reaches a query). */
export function isInstanceId(id: string): boolean {
  return /^[A-Za-z0-9_.:-]{1,200}$/.test(id);
}

const FINISHED: ReadonlySet<InstanceStatus> = new Set(["completed", "failed", "cancelled"]);

export function isFinished(status: InstanceStatus): boolean {
  return FINISHED.has(status);
}

/**
 * How long a client should wait before asking again. A running instance
 * moves step by step (sub-second); a sleeping one waits for a timer that the
 * sweeper fires; one waiting for a message may wait for a person, for days.
 */
export function pollIntervalMs(status: InstanceStatus): number | undefined {
  switch (status) {
    case "running":
    case "compensating":
      return 1000;
    default:
      // A waiting instance: as its wait kind says (core/model.ts WAIT_KINDS).
      return waitKindOf(status)?.view.pollIntervalMs ?? (isFinished(status) ? undefined : 5000);
  }
}

export interface InstanceSummary {
  instance_id: string;
  workflow: string;
  status: InstanceStatus;
  finished: boolean;
  completed_activities: number;
  current_activity_id: string | null;
  started_at: string;
  updated_at: string;
  /** Absent once finished. */
  suggested_poll_interval_ms?: number;
}

export function summarize(view: InstanceView, completedActivities: number): InstanceSummary {
  const poll = pollIntervalMs(view.status);
  return {
    instance_id: view.instanceId,
    workflow: view.workflowName,
    status: view.status,
    finished: isFinished(view.status),
    completed_activities: completedActivities,
    current_activity_id: view.currentActivityId,
    started_at: view.startedAt,
    updated_at: view.updatedAt,
    ...(poll !== undefined ? { suggested_poll_interval_ms: poll } : {}),
  };
}

export interface HistoryEntry {
  activity_id: string;
  event_type: string;
  created_at: string;
}

/** The instance with its history (event kinds, no payloads) and completed activity count. */
export async function loadInstance(engine: Engine, instanceId: string): Promise<{ view: InstanceView; history: HistoryEntry[]; completed: number } | null> {
  const view = await engine.getInstance(instanceId);
  if (!view) return null;
  const events = await engine.historyEvents(instanceId);
  const history = events.map((e) => ({ activity_id: e.activityId, event_type: e.eventType, created_at: e.createdAt.toISOString() }));
  return { view, history, completed: events.filter((e) => e.eventType === EV.ActivityCompleted).length };
}

/** A cancelled instance whose compensations still run is already cancelled for its caller: the decision is final. */
export function taskStatus(view: InstanceView): Task["status"] {
  if (view.status === "completed") return "completed";
  if (view.status === "failed") return "failed";
  if (view.status === "cancelled" || (view.status === "compensating" && view.cancellation !== null)) return "cancelled";
  return "working";
}

function statusMessage(view: InstanceView): string {
  if (view.status === "failed") return `failed: ${errorText(view.error)}`;
  if (view.status === "compensating") return view.cancellation !== null ? "cancelled; compensations are running" : "failed; compensations are running";
  const wait = waitKindOf(view.status);
  if (wait) return wait.view.says;
  if (view.status === "parked") return `parked (its history no longer replays with the deployed code): ${errorText(view.error)}`;
  return view.status;
}

export function toTask(view: InstanceView): Task {
  const poll = pollIntervalMs(view.status);
  return {
    taskId: view.instanceId,
    status: taskStatus(view),
    statusMessage: statusMessage(view),
    createdAt: view.startedAt,
    lastUpdatedAt: view.updatedAt,
    // The task lives as long as its instance: Edda's retention decides, not a TTL.
    ttl: null,
    ...(poll !== undefined ? { pollInterval: poll } : {}),
  };
}

function errorText(error: unknown): string {
  const e = (error ?? {}) as { error_type?: unknown; error_message?: unknown };
  if (typeof e.error_message === "string") return typeof e.error_type === "string" ? `${e.error_type}: ${e.error_message}` : e.error_message;
  return "unknown error";
}

/** The outcome as a tool result. `finishedIsError`: failed and cancelled runs are errors (tasks/result); a `_result` call reports them as data. */
export function outcome(view: InstanceView, finishedIsError: boolean): CallToolResult {
  const base = { instance_id: view.instanceId, workflow: view.workflowName, status: view.status, finished: isFinished(view.status) };
  if (view.status === "completed") {
    return jsonResult({ ...base, output: view.output });
  }
  if (view.status === "failed") {
    return jsonResult({ ...base, error: view.error }, finishedIsError, `${view.workflowName} ${view.instanceId} failed: ${errorText(view.error)}`);
  }
  if (view.status === "cancelled" || (view.status === "compensating" && view.cancellation !== null)) {
    return jsonResult({ ...base, cancellation: view.cancellation }, finishedIsError, `${view.workflowName} ${view.instanceId} was cancelled`);
  }
  const poll = pollIntervalMs(view.status);
  return jsonResult(
    { ...base, ...(poll !== undefined ? { suggested_poll_interval_ms: poll } : {}) },
    false,
    `${view.workflowName} ${view.instanceId} has no result yet (status ${view.status}); ask again later`,
  );
}

/** A tool result carrying `data` both as structured content and as JSON text (for clients that read only text). */
export function jsonResult(data: Record<string, unknown>, isError = false, headline?: string): CallToolResult {
  const text = JSON.stringify(data, null, 2);
  return {
    content: [{ type: "text", text: headline ? `${headline}\n${text}` : text }],
    structuredContent: data,
    ...(isError ? { isError: true } : {}),
  };
}

export function toolError(message: string, details: Record<string, unknown> = {}): CallToolResult {
  return { content: [{ type: "text", text: message }], structuredContent: { error: message, ...details }, isError: true };
}
