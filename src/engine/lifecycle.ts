/**
 * Engine side of child links, deadlines and parking.
 *
 * - A child's start runs in its parent's step transaction (`startChildIn`);
 *   its first step is dispatched after that commit.
 * - A child's terminal conclusion locks its parent's row first, then
 *   concludes, then records its outcome in the parent when the parent waits
 *   for it — one transaction, so the parent is runnable the moment the child
 *   is final, and is dispatched right after the commit. A parent whose wait
 *   registration comes later reads the finished child's row instead
 *   (`prepareChildWait`, under its own row lock). See storage/lifecycle.ts.
 * - Ending an instance from outside (cancel, deadline) takes its
 *   non-detached, unfinished children along in the same transaction, parent
 *   rows before child rows.
 */
import { NotFoundError, TerminalError, WorkflowTimeoutError } from "../core/errors.ts";
import { EV, TERMINAL_STATUSES, type InstanceStatus, type NewHistoryEvent } from "../core/model.ts";
import type { WaitRequest } from "../core/replay.ts";
import { fromJson, instanceErrorData, toPayload, type SerializedError } from "../core/serialization.ts";
import type { InstanceEnd, InstanceRecord, Storage, TxStorage } from "../storage/types.ts";
import type { ChildStart, RecordedChildOutcome } from "./children.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { afterStart, createValidated, validateInput } from "./starts.ts";
import { slotFreed } from "./flow-control.ts";
import { sourceHash } from "./source-hashes.ts";

type ChildWait = Extract<WaitRequest, { kind: "child" }>;

/** In the parent's step transaction: create the child (linked), dispatch it after the commit. */
export async function startChildIn(deps: Uses<"definitions" | "deployment" | "dispatcher" | "hooks" | "serviceName" | "tracing" | "workflows">, storage: Storage, parentId: string, req: ChildStart, afterCommit: (cb: () => void) => void, scope?: DispatchScope): Promise<string> {
  const wf = deps.workflows.get(req.workflowName);
  if (!wf) throw new TerminalError(`child workflow "${req.workflowName}" is not registered in this app`);
  const value = validateInput(wf, req.input);
  const r = await createValidated(deps, storage, wf, value, { instanceId: req.instanceId }, { parentInstanceId: parentId, parentActivityId: req.parentActivityId, detached: req.detached });
  if (!r.created) {
    const existing = await storage.getInstance(r.instanceId);
    if (existing?.parentInstanceId !== parentId) throw new TerminalError(`instance id "${r.instanceId}" is taken by an instance that is not a child of ${parentId}`);
    return r.instanceId;
  }
  afterCommit(() => afterStart(deps, wf, r.instanceId, value, scope, r.traceContext));
  return r.instanceId;
}

/** A stored instance error (`{error_type, error_message, …}`) as a serialized error, for a child's cause. */
function storedError(errorData: string | null): SerializedError | null {
  if (!errorData) return null;
  const e = fromJson(errorData) as Record<string, unknown>;
  return {
    name: typeof e.error_type === "string" ? e.error_type : "Error",
    message: typeof e.error_message === "string" ? e.error_message : "",
    ...(typeof e.stack === "string" ? { stack: e.stack } : {}),
    ...(e.cause ? { cause: e.cause as SerializedError } : {}),
    ...(e.fields ? { fields: e.fields as SerializedError["fields"] } : {}),
  };
}

/** The record of a finished child at its parent's wait. */
export function childOutcomeEvent(
  activityId: string,
  child: { instanceId: string; workflowName: string },
  status: InstanceStatus,
  outputData: string | null,
  errorData: string | null,
): NewHistoryEvent {
  const base = { name: child.workflowName, instanceId: child.instanceId };
  if (status === "completed") {
    const r: RecordedChildOutcome = { ...base, status, output: outputData === null ? null : fromJson(outputData) };
    return { activityId, eventType: EV.ChildCompleted, data: toPayload(r) };
  }
  const r: RecordedChildOutcome = { ...base, status: status === "cancelled" ? "cancelled" : "failed", error: storedError(errorData) };
  return { activityId, eventType: EV.ChildFailed, data: toPayload(r) };
}

/**
 * In the parent's step transaction: lock the parent's own row, then read the
 * child. A finished child's outcome is recorded now; otherwise the parent
 * waits (the child kind's status) and the child's conclusion will record it.
 */
export async function prepareChildWait(tx: TxStorage, instanceId: string, w: ChildWait): Promise<{ kind: "ready"; event: NewHistoryEvent } | { kind: "waiting" }> {
  await tx.lockInstanceRow(instanceId);
  const child = await tx.getInstance(w.childInstanceId);
  if (!child) {
    const error = instanceErrorData(new NotFoundError(`child instance "${w.childInstanceId}" no longer exists`));
    return { kind: "ready", event: childOutcomeEvent(w.activityId, { instanceId: w.childInstanceId, workflowName: "" }, "failed", null, error) };
  }
  if (!TERMINAL_STATUSES.includes(child.status)) return { kind: "waiting" };
  return { kind: "ready", event: childOutcomeEvent(w.activityId, child, child.status, child.outputData, child.errorData) };
}

/** Whether a conclusion to `status` must reach a waiting parent. */
export function reportsToParent(instance: InstanceRecord, status: InstanceStatus): boolean {
  return instance.parentInstanceId !== null && instance.parentActivityId !== null && TERMINAL_STATUSES.includes(status);
}

/**
 * After a child's terminal conclusion, in the same transaction (the parent's
 * row was locked before the conclusion): record the outcome in the parent if
 * it waits for it; the parent is dispatched after the commit.
 */
export async function deliverToParent(
  deps: Uses<"dispatcher">,
  tx: TxStorage,
  child: InstanceRecord,
  status: InstanceStatus,
  outputData: string | null,
  errorData: string | null,
  scope?: DispatchScope,
): Promise<void> {
  const parentId = child.parentInstanceId!;
  const event = childOutcomeEvent(child.parentActivityId!, child, status, outputData, errorData);
  if (await tx.recordChildOutcome(parentId, child.parentActivityId!, event)) {
    tx.afterCommit(() => deps.dispatcher.dispatch({ instanceId: parentId }, scope));
  }
}

export interface EndResult {
  ok: boolean;
  status: InstanceStatus;
  previousStatus: InstanceStatus;
}

/**
 * End an instance from outside its steps (cancel, deadline) with the
 * children it takes along, in one transaction: its parent's row locked
 * first (a cancelled or failed child reports to a waiting parent), then the
 * instance, then its non-detached, unfinished descendants (cancelled).
 * After the commit: compensating instances are dispatched, hooks run.
 */
export async function endInstanceTree(deps: Uses<"dispatcher" | "hooks" | "storage" | "workflows">, instanceId: string, end: InstanceEnd, scope?: DispatchScope): Promise<EndResult | null> {
  return deps.storage.transaction((tx) => endInstanceTreeIn(deps, tx, instanceId, end, scope));
}

/**
 * `endInstanceTree` in the caller's transaction `tx` (a bulk operation's
 * batch): what happens after the commit is registered on `tx`, so it happens
 * once, after the batch commits, and not at all when it rolls back.
 */
export async function endInstanceTreeIn(deps: Uses<"dispatcher" | "hooks" | "storage" | "workflows">, tx: TxStorage, instanceId: string, end: InstanceEnd, scope?: DispatchScope): Promise<EndResult | null> {
  const root = await tx.getInstance(instanceId);
  if (!root) return null;
  const ended: { instance: InstanceRecord; status: InstanceStatus }[] = [];
  const r = await (async () => {
    if (root.parentInstanceId && root.parentActivityId) await tx.lockInstanceRow(root.parentInstanceId);
    const res = await tx.endInstance(instanceId, end);
    if (!res?.ok) return res;
    ended.push({ instance: root, status: res.status });
    if (reportsToParent(root, res.status)) {
      await deliverToParent(deps, tx, root, res.status, null, end.kind === "timeout" ? end.errorData : null, scope);
    }
    const queue = await tx.listCancellableChildren(instanceId);
    while (queue.length) {
      const childId = queue.shift()!;
      const c = await tx.endInstance(childId, { kind: "cancel", cancelledBy: `parent:${instanceId}` });
      if (!c?.ok) continue;
      const child = await tx.getInstance(childId);
      if (child) ended.push({ instance: child, status: c.status });
      queue.push(...(await tx.listCancellableChildren(childId)));
    }
    return res;
  })();
  tx.afterCommit(() => {
    for (const e of ended) {
      const target = { instanceId: e.instance.instanceId, workflowName: e.instance.workflowName };
      if (e.status === "compensating") deps.dispatcher.dispatch({ instanceId: target.instanceId }, scope);
      else if (e.status === "cancelled") deps.hooks.onWorkflowCancelled?.(target);
      else if (e.status === "failed" && end.kind === "timeout") deps.hooks.onWorkflowFailed?.({ ...target, error: timeoutError(e.instance) });
      if (e.status === "cancelled" || e.status === "failed") slotFreed(deps, target, scope);
    }
  });
  return r;
}

/**
 * An operator's resume, in `tx`: a parked instance replays against the
 * deployed code (parked again if it still diverges); a quarantined one goes
 * back to the status it had, failure count reset. Dispatched after the commit
 * when runnable. Null: no such instance.
 */
export async function resumeIn(deps: Uses<"dispatcher">, tx: TxStorage, instanceId: string, scope?: DispatchScope): Promise<{ ok: boolean; status: InstanceStatus } | null> {
  if (await tx.resumeParked(instanceId)) {
    tx.afterCommit(() => deps.dispatcher.dispatch({ instanceId }, scope));
    return { ok: true, status: "running" };
  }
  const r = await tx.resumeQuarantined(instanceId);
  if (r?.ok && (r.status === "running" || r.status === "compensating")) tx.afterCommit(() => deps.dispatcher.dispatch({ instanceId }, scope));
  return r;
}

function timeoutError(instance: InstanceRecord): WorkflowTimeoutError {
  const wfTimeout = instance.deadlineAt ? ` (deadline ${instance.deadlineAt.toISOString()})` : "";
  return new WorkflowTimeoutError(`workflow "${instance.workflowName}" ran past its timeoutSeconds${wfTimeout}`);
}

/** Fail every instance whose deadline passed (bounded); returns how many this call ended. */
export async function expireDeadlines(deps: Uses<"dispatcher" | "hooks" | "storage" | "workflows">, limit: number, scope?: DispatchScope): Promise<number> {
  const ids = await deps.storage.findExpiredDeadlines(limit);
  let n = 0;
  for (const id of ids) {
    const inst = await deps.storage.getInstance(id);
    if (!inst) continue;
    const r = await endInstanceTree(deps, id, { kind: "timeout", errorData: instanceErrorData(timeoutError(inst)) }, scope);
    if (r?.ok) n++;
  }
  return n;
}

/** Sweeper: parked instances of workflows whose deployed code differs from the code they diverged from go back to running. */
export async function unparkChanged(deps: Uses<"dispatcher" | "storage" | "workflows">, limit: number, scope?: DispatchScope): Promise<number> {
  // One statement for all workflows, and no definition writes (the step that replays an instance records its
  // definition): a Worker's cron builds a fresh engine per invocation, where a query and a definition upsert
  // per workflow made this task cost 2 statements per workflow — past the Free plan's 10 ms on its own.
  const current = await Promise.all([...deps.workflows.values()].map(async (wf) => ({ workflowName: wf.workflowName, hash: await sourceHash(wf) })));
  if (current.length === 0) return 0;
  const ids = await deps.storage.unparkInstances(current, limit);
  for (const id of ids) deps.dispatcher.dispatch({ instanceId: id }, scope);
  return ids.length;
}
