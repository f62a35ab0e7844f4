/**
 * What the API shows of an instance: the JSON views the engine builds from
 * stored rows (`GET /instances/:id`, lists, results, the viewer, MCP). The
 * typed client (`edda-edge/client`) imports these types, never this module's
 * code, so the server's answers and the client's types are one definition.
 */
import { fromJson, instanceErrorView, type ErrorViewOptions, type StoredError } from "../core/serialization.ts";
import type { WhyReason } from "./why-view.ts";
import type { ChildSummary, FailureTask, InstanceRecord, InstanceStatus, WaitWebhookRecord, WaitWebhookStatus } from "../storage/types.ts";

export type { StoredError };

export interface InstanceView {
  instanceId: string;
  workflowName: string;
  status: InstanceStatus;
  run: number;
  input: unknown;
  output: unknown;
  error: StoredError | null;
  cancellation: unknown;
  currentActivityId: string | null;
  /**
   * No step holds the instance and it is ready to run: a dispatch or the next
   * sweep will run its next step (e.g. a follow-up chain stopped at its hop bound).
   */
  runnable: boolean;
  /**
   * The latest failure counted against the instance (poison isolation): where
   * (`step`, `timers`, `message_timeouts`, `channel_delivery`, `retention`),
   * the error's type and message, when, how many in a row, and for a
   * quarantined instance the status it will resume in. Null when none.
   */
  failure: InstanceFailureView | null;
  startedAt: string;
  updatedAt: string;
  /** The instance that started this one (`invoke`, `startChild`), or null. */
  parentInstanceId: string | null;
  /** Workflow `timeoutSeconds`: when the run fails if still unfinished, or null. */
  deadlineAt: string | null;
  /** The flow-control keys of a workflow with `concurrency`, `rateLimit`, `singleton` or `debounce`; null without. */
  flowControl: FlowControlView | null;
  /** `POST /instances/:id/rerun`: the instance this one reran (same workflow, its input unless a new one was given), or null. */
  rerunOf: string | null;
  /** `POST /instances/:id/fork`: the instance whose history before `fromActivityId` this one continues, or null. */
  forkOf: { instanceId: string; fromActivityId: string } | null;
  /** `start(…, { priority })`: order within a flow-control key's queue (default 0). */
  priority: number;
  /** The deployment that started it (`GET /deployments`); null for instances from before deployments were recorded. */
  deployment: string | null;
}

/** Keys are the values the workflow's key functions returned (without the `{workflow}:` prefix stored with them). */
export interface FlowControlView {
  concurrencyKey: string | null;
  rateKey: string | null;
  /** Rate limit: when it left the queue (the instant its window counts); null while queued. */
  admittedAt: string | null;
  singletonKey: string | null;
  debounceKey: string | null;
  /** Debounce: while pending, the earliest start (pushed back by each start of the key). */
  notBefore: string | null;
}

export interface InstanceFailureView {
  task: FailureTask;
  errorType: string;
  message: string;
  at: string;
  /** Failures in a row. */
  attempts: number;
  /** For a quarantined instance: the status a resume puts it back in. */
  previousStatus: InstanceStatus | null;
}

/** History entries per page (`historyPage`, and the first page of `getInstance(id, { history: true })`). */
export const HISTORY_PAGE_MAX = 500;

/** A recorded step of an instance (`getInstance(id, { history: true })`); binary payloads show their size. */
export interface HistoryEntry {
  id: number;
  activityId: string;
  eventType: string;
  data: unknown;
  createdAt: string;
}

/** One instance as `getInstance(id)` shows it: its view and children; with `history`, the first page of its history. */
export interface InstanceDetail extends InstanceView {
  /** The children it started, oldest first (at most 100). */
  children: ChildSummary[];
  /** Its per-wait webhook URLs (`createWebhook`), oldest first (at most 100): state only, never the URL (its token is not stored). */
  webhooks: WaitWebhookView[];
  /** Its tags (search attributes: the workflow's `tags` option and `setTags`), by key. */
  tags: Record<string, string>;
  /** Why it is not moving and what will move it (`GET /instances/:id/why`'s reason). */
  why: WhyReason;
  /** With `history`: the first page (at most HISTORY_PAGE_MAX entries). */
  history?: HistoryEntry[];
  /** More history: pass to `historyPage(id, { after })` (`GET /instances/:id/history?after=`). */
  historyNextCursor?: string | null;
}

export interface WaitWebhookView {
  id: string;
  run: number;
  status: WaitWebhookStatus;
  expiresAt: string | null;
  createdAt: string;
  firedAt: string | null;
}

export function waitWebhookView(h: WaitWebhookRecord): WaitWebhookView {
  return { id: h.hookId, run: h.run, status: h.status, expiresAt: h.expiresAt?.toISOString() ?? null, createdAt: h.createdAt.toISOString(), firedAt: h.firedAt?.toISOString() ?? null };
}

export function toView(inst: InstanceRecord, errors: ErrorViewOptions = {}): InstanceView {
  return {
    instanceId: inst.instanceId,
    workflowName: inst.workflowName,
    status: inst.status,
    run: inst.run,
    input: fromJson(inst.inputData),
    output: inst.outputData === null ? null : fromJson(inst.outputData),
    error: inst.errorData === null ? null : instanceErrorView(fromJson(inst.errorData), errors),
    cancellation: inst.cancelData === null ? null : fromJson(inst.cancelData),
    currentActivityId: inst.currentActivityId,
    runnable: (inst.status === "running" || inst.status === "compensating") && (inst.lockedBy === null || (inst.lockExpiresAt !== null && inst.lockExpiresAt.getTime() <= Date.now())),
    failure: failureView(inst.failureData),
    startedAt: inst.startedAt.toISOString(),
    updatedAt: inst.updatedAt.toISOString(),
    parentInstanceId: inst.parentInstanceId,
    deadlineAt: inst.deadlineAt?.toISOString() ?? null,
    flowControl: flowControlView(inst),
    rerunOf: inst.originKind === "rerun" ? inst.originInstanceId : null,
    forkOf: inst.originKind === "fork" && inst.originInstanceId !== null ? { instanceId: inst.originInstanceId, fromActivityId: inst.originActivityId ?? "" } : null,
    priority: inst.priority,
    deployment: inst.deployment,
  };
}

function flowControlView(inst: InstanceRecord): FlowControlView | null {
  const { concurrencyKey, rateKey, singletonKey, debounceKey } = inst;
  if (concurrencyKey === null && rateKey === null && singletonKey === null && debounceKey === null) return null;
  const bare = (k: string | null) => (k === null ? null : k.slice(inst.workflowName.length + 1));
  return {
    concurrencyKey: bare(concurrencyKey),
    rateKey: bare(rateKey),
    admittedAt: inst.admittedAt?.toISOString() ?? null,
    singletonKey: bare(singletonKey),
    debounceKey: bare(debounceKey),
    notBefore: inst.notBefore?.toISOString() ?? null,
  };
}

export function failureView(data: string | null): InstanceFailureView | null {
  if (data === null) return null;
  const f = fromJson(data) as Record<string, unknown> | null;
  if (!f || typeof f !== "object") return null;
  const text = (v: unknown) => (typeof v === "string" ? v : "");
  return {
    // Written by recordInstanceFailure from a FailureTask.
    task: text(f.task) as FailureTask,
    errorType: text(f.error_type),
    message: text(f.message),
    at: text(f.at),
    attempts: typeof f.attempts === "number" ? f.attempts : 0,
    previousStatus: typeof f.previous_status === "string" ? (f.previous_status as InstanceStatus) : null,
  };
}
