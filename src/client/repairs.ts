/**
 * The client's repair methods (rerun, fork, bulk actions, schedule control),
 * built over the client's request function so `index.ts` stays the core.
 */
import type { BulkOperationView } from "../engine/bulk.ts";
import type { BulkAction } from "../engine/records.ts";
import type { InstanceStatus } from "../core/model.ts";

export type { BulkAction, BulkOperationView };

export interface RepairedInstance {
  instanceId: string;
  status: InstanceStatus;
  /** False: the request id's instance already existed, and this is it. */
  created: boolean;
}

/** A per-wait webhook a fork's copied prefix created, under the fork's own URL (the one place it is shown). */
export interface ForkedWebhook {
  id: string;
  url: string;
  status: "open" | "fired" | "expired" | "cancelled";
  expiresAt: string | null;
}

export interface ForkedInstance extends RepairedInstance {
  copiedEvents: number;
  webhooks: ForkedWebhook[];
}

/** The list filters a bulk action matches instances by. */
export interface BulkFilter<N extends string = string> {
  workflow?: N;
  /** One status or several (any of which matches), as the list takes them. */
  status?: InstanceStatus | InstanceStatus[];
  startedAfter?: Date | string;
  startedBefore?: Date | string;
  /** Literal text in the instance id or the input JSON. */
  search?: string;
  /** Instances on this deployment (`deployments()`). */
  deployment?: string;
}

export type BulkActionName = BulkAction;

export interface RepairMethods<N extends string = string> {
  /** Start a new instance of a finished instance's workflow with its input (or `input`), linked by `rerunOf`; idempotent per `requestId`. */
  rerun(instanceId: string, opts?: { input?: unknown; requestId?: string }): Promise<RepairedInstance>;
  /** Start a new instance from the history before `fromActivityId` (e.g. "ship_order:1"): results before it are reused, the rest runs again (EddaApiError 409 when the prefix does not replay with the deployed code). */
  fork(instanceId: string, fromActivityId: string, opts?: { requestId?: string }): Promise<ForkedInstance>;
  /** How many instances a filter matches now (a bulk dry run). */
  bulkCount(filter: BulkFilter<N>): Promise<number>;
  /** Cancel, resume, rerun or upgrade every instance `filter` matches, as a durable operation; its progress: `operation(id)`. */
  bulk(filter: BulkFilter<N>, action: BulkActionName, opts?: { requestId?: string }): Promise<BulkOperationView>;
  /** A bulk operation's progress (null: no such operation). */
  operation(operationId: string): Promise<BulkOperationView | null>;
  pauseSchedule(workflow: N): Promise<{ workflow: N; pausedAt: string | null; nextRunAt: string | null }>;
  resumeSchedule(workflow: N): Promise<{ workflow: N; pausedAt: string | null; nextRunAt: string | null }>;
  /** Start one instance of a scheduled workflow now (paused or not); idempotent per `requestId`. */
  triggerSchedule(workflow: N, opts?: { requestId?: string }): Promise<RepairedInstance>;
}

type Call = <T>(method: string, path: string, body?: unknown, init?: { accept?: number[] }) => Promise<{ status: number; body: T }>;

export function repairMethods<N extends string>(call: Call): RepairMethods<N> {
  const enc = encodeURIComponent;
  const iso = (d: Date | string) => (typeof d === "string" ? d : d.toISOString());
  const filterBody = (f: BulkFilter<N>) => ({
    ...(f.workflow !== undefined ? { workflow: f.workflow } : {}),
    ...(f.status !== undefined ? { status: f.status } : {}),
    ...(f.startedAfter !== undefined ? { startedAfter: iso(f.startedAfter) } : {}),
    ...(f.startedBefore !== undefined ? { startedBefore: iso(f.startedBefore) } : {}),
    ...(f.search !== undefined ? { search: f.search } : {}),
    ...(f.deployment !== undefined ? { deployment: f.deployment } : {}),
  });
  const repaired = <T extends { instanceId: string; status: InstanceStatus }>(r: { status: number; body: T }) => ({ ...r.body, created: r.status === 201 });
  return {
    async rerun(instanceId, o = {}) {
      return repaired(await call<{ instanceId: string; status: InstanceStatus }>("POST", `/instances/${enc(instanceId)}/rerun`, { ...("input" in o ? { input: o.input } : {}), ...(o.requestId ? { requestId: o.requestId } : {}) }));
    },
    async fork(instanceId, fromActivityId, o = {}) {
      return repaired(await call<Omit<ForkedInstance, "created">>("POST", `/instances/${enc(instanceId)}/fork`, { fromActivityId, ...(o.requestId ? { requestId: o.requestId } : {}) }));
    },
    async bulkCount(filter) {
      return (await call<{ count: number }>("POST", "/instances/bulk", { filter: filterBody(filter), action: "cancel", dryRun: true })).body.count;
    },
    async bulk(filter, action, o = {}) {
      return (await call<BulkOperationView>("POST", "/instances/bulk", { filter: filterBody(filter), action, ...(o.requestId ? { requestId: o.requestId } : {}) })).body;
    },
    async operation(operationId) {
      const r = await call<BulkOperationView>("GET", `/operations/${enc(operationId)}`, undefined, { accept: [404] });
      return r.status === 404 ? null : r.body;
    },
    async pauseSchedule(workflow) {
      return (await call<{ workflow: N; pausedAt: string | null; nextRunAt: string | null }>("POST", `/schedules/${enc(workflow)}/pause`, {})).body;
    },
    async resumeSchedule(workflow) {
      return (await call<{ workflow: N; pausedAt: string | null; nextRunAt: string | null }>("POST", `/schedules/${enc(workflow)}/resume`, {})).body;
    },
    async triggerSchedule(workflow, o = {}) {
      return repaired(await call<{ instanceId: string; status: InstanceStatus }>("POST", `/schedules/${enc(workflow)}/trigger`, o.requestId ? { requestId: o.requestId } : {}));
    },
  };
}
