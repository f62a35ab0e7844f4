/**
 * Repairing finished or stuck instances: rerun and fork.
 *
 * - Rerun starts a new instance of a finished instance's workflow with its
 *   input (or a new one), linked to it (`rerunOf`).
 * - Fork starts a new instance whose history is the original's before one of
 *   its activities: replay reuses the results recorded before that point and
 *   runs everything from it on with the deployed code. The prefix must replay
 *   with the deployed code (verify.ts's check); otherwise the fork is refused.
 *
 * A fork whose prefix created per-wait webhooks (createWebhook) gets a hook
 * row of its own for each, under the URL its replay derives — the token is an
 * HMAC over the instance, so the fork's URL is new and the original's keeps
 * answering for the original only. Since the history holds no URL and the
 * views never show one, the fork's response carries them: whoever forks
 * hands them on (the mail with the original's link is in the prefix and is
 * not sent again). Each keeps the original's expiry (what `hook.expiresAt`
 * replays as); fork from the creation itself for a fresh link and expiry.
 *
 * Both are idempotent per request id: the new instance's id is derived from
 * the original's and the request id, so the same request returns the same
 * instance. Both create in the caller's transaction when given one (a bulk
 * operation's batch) and start the new instance after its commit.
 */
import { ConflictError, NotFoundError, ValidationError } from "../core/errors.ts";
import { fnv1a64 } from "../core/ids.ts";
import { COMPENSATION_PREFIX, TERMINAL_STATUSES, type InstanceStatus } from "../core/model.ts";
import { fromJson } from "../core/serialization.ts";
import type { Workflow } from "../core/definitions.ts";
import type { InstanceRecord, TxStorage, WaitWebhookStatus } from "../storage/types.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { afterStart, createValidated, validateInput } from "./starts.ts";
import { verifyReplay } from "./verify.ts";
import { webhookCreations, webhookLinksOf } from "./webhook-waits.ts";

/** Statuses a fork may start from: finished, or stuck (parked by a divergence, quarantined by failures). */
export const FORKABLE_STATUSES: readonly InstanceStatus[] = [...TERMINAL_STATUSES, "parked", "quarantined"];

/** 1–100 characters of A-Z a-z 0-9 _ . : - (it becomes part of an instance id). */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,100}$/;

export interface Repaired {
  instanceId: string;
  status: InstanceStatus;
  /** False: the request id's instance already existed, and this is it. */
  created: boolean;
}

type StartDeps = Uses<"definitions" | "deployment" | "dispatcher" | "hooks" | "serviceName" | "storage" | "tracing" | "workflows">;

function checkRequestId(requestId: string | undefined): void {
  if (requestId !== undefined && !REQUEST_ID_PATTERN.test(requestId)) {
    throw new ValidationError("requestId must be 1–100 characters of A-Z a-z 0-9 _ . : -", [{ path: ["requestId"], message: "invalid request id" }]);
  }
}

/** The new instance's id for a request id (none: a fresh id per call). */
export function repairId(kind: "rerun" | "fork", originId: string, requestId: string | undefined): string | undefined {
  return requestId === undefined ? undefined : `${kind}-${fnv1a64(originId)}-${requestId}`;
}

function registered(deps: Uses<"workflows">, inst: InstanceRecord): Workflow {
  const wf = deps.workflows.get(inst.workflowName);
  if (!wf) throw new ValidationError(`workflow "${inst.workflowName}" of instance "${inst.instanceId}" is not registered in this app`, [{ path: ["instanceId"], message: "workflow not deployed" }]);
  return wf;
}

/** The instance a request id already made: it must be this origin's rerun or fork. */
function checkSame(found: InstanceRecord | null, origin: string, kind: "rerun" | "fork"): void {
  if (found && (found.originInstanceId !== origin || found.originKind !== kind)) {
    throw new ConflictError(`instance "${found.instanceId}" exists and is not a ${kind} of "${origin}"`);
  }
}

/**
 * Rerun a finished instance (completed, failed, cancelled) in `tx` (the
 * engine's own transaction, or a bulk operation's batch). The input is the original's unless `input` is
 * given; either way it is checked against the deployed workflow's schema.
 */
export async function rerunIn(deps: StartDeps, storage: TxStorage, instanceId: string, opts: { requestId?: string; input?: { value: unknown } }, scope?: DispatchScope): Promise<Repaired> {
  checkRequestId(opts.requestId);
  const origin = await storage.getInstance(instanceId);
  if (!origin) throw new NotFoundError(`instance "${instanceId}" not found`);
  const newId = repairId("rerun", instanceId, opts.requestId);
  if (newId !== undefined) {
    const found = await storage.getInstance(newId);
    checkSame(found, instanceId, "rerun");
    if (found) return { instanceId: found.instanceId, status: found.status, created: false };
  }
  if (!TERMINAL_STATUSES.includes(origin.status)) throw new ConflictError(`instance "${instanceId}" is ${origin.status}: only a finished instance (completed, failed, cancelled) can be rerun`);
  const wf = registered(deps, origin);
  const value = validateInput(wf, opts.input ? opts.input.value : fromJson(origin.inputData));
  const r = await createValidated(deps, storage, wf, value, {
    ...(newId ? { instanceId: newId } : {}),
    ...(origin.priority ? { priority: origin.priority } : {}),
    origin: { instanceId, kind: "rerun", activityId: null },
  });
  if (r.created) storage.afterCommit(() => afterStart(deps, wf, r.instanceId, value, scope, r.traceContext));
  return { instanceId: r.instanceId, status: r.status, created: r.created };
}

/**
 * Fork an instance from one of its activities (`fromActivityId`, as the
 * history shows it, e.g. "ship_order:1"): a new instance with the original's
 * input and the original's current-run history before the first event at that
 * activity (its attempts `{id}#n` included). Refused (ConflictError) when that
 * prefix does not replay with the deployed code, and (ValidationError) when
 * the history has no such activity.
 */
/** A hook the fork's prefix created, as the fork has it: the URL to hand on, its state and expiry. */
export interface ForkedWebhook {
  id: string;
  url: string;
  status: WaitWebhookStatus;
  expiresAt: string | null;
}

export type Forked = Repaired & { copiedEvents: number; webhooks: ForkedWebhook[] };

export async function fork(deps: StartDeps & Uses<"errorClasses" | "webhookLinks">, instanceId: string, opts: { fromActivityId: string; requestId?: string }, scope?: DispatchScope): Promise<Forked> {
  checkRequestId(opts.requestId);
  const origin = await deps.storage.getInstance(instanceId);
  if (!origin) throw new NotFoundError(`instance "${instanceId}" not found`);
  const newId = repairId("fork", instanceId, opts.requestId) ?? crypto.randomUUID();
  const found = await deps.storage.getInstance(newId);
  checkSame(found, instanceId, "fork");
  if (found) return { instanceId: found.instanceId, status: found.status, created: false, copiedEvents: 0, webhooks: await forkedWebhooks(deps, found.instanceId) };
  if (!FORKABLE_STATUSES.includes(origin.status)) {
    throw new ConflictError(`instance "${instanceId}" is ${origin.status}: fork a finished, parked or quarantined instance (cancel it first to fork a live one)`);
  }
  if (opts.fromActivityId.startsWith(COMPENSATION_PREFIX)) {
    // A compensation is recorded after the body ended: a prefix up to it would hold the whole body and the saga's
    // earlier compensations, and a step over such a history continues the compensations (decide.ts `phase`), not a body.
    throw new ValidationError(`"${opts.fromActivityId}" is a compensation: fork from an activity of the workflow body`, [{ path: ["fromActivityId"], message: "a compensation, not a body activity" }]);
  }
  const wf = registered(deps, origin);
  const history = await deps.storage.loadHistory(instanceId);
  const at = history.findIndex((e) => e.activityId === opts.fromActivityId || e.activityId.startsWith(`${opts.fromActivityId}#`));
  if (at < 0) {
    throw new ValidationError(`instance "${instanceId}" has no activity "${opts.fromActivityId}" in its history (current run)`, [{ path: ["fromActivityId"], message: "not in the history" }]);
  }
  const prefix = history.slice(0, at);
  // The check verify-replay runs before a deploy: the deployed code must reach the fork point the way the prefix recorded.
  const verdict = await verifyReplay(wf, { ...origin, instanceId: newId }, prefix, deps.errorClasses);
  if (!verdict.ok) {
    throw new ConflictError(`the history of "${instanceId}" before "${opts.fromActivityId}" does not replay with the deployed code of workflow "${wf.workflowName}": ${verdict.error}`);
  }
  const creations = webhookCreations(prefix);
  if (creations.length > 0 && !deps.webhookLinks) {
    throw new ConflictError(`the history of "${instanceId}" before "${opts.fromActivityId}" holds createWebhook at ${creations.map((c) => c.hookId).join(", ")}: the fork's URLs are derived from EDDA_SECRET, which this app does not have`);
  }
  const links = deps.webhookLinks ? await webhookLinksOf(deps.webhookLinks, newId, creations) : [];
  const value = fromJson(origin.inputData);
  const beforeEventId = history[at]!.id;
  const created = await deps.storage.transaction(async (tx) => {
    const r = await createValidated(deps, tx, wf, value, {
      instanceId: newId,
      ...(origin.priority ? { priority: origin.priority } : {}),
      origin: { instanceId, kind: "fork", activityId: opts.fromActivityId },
    });
    // A racing request with the same id made it first: that one is the fork.
    if (!r.created) return { r, copied: 0, hooks: [] };
    const copied = await tx.copyHistoryPrefix(instanceId, r.instanceId, beforeEventId);
    const hooks = await tx.forkWaitWebhooks(instanceId, r.instanceId, links);
    tx.afterCommit(() => afterStart(deps, wf, r.instanceId, value, scope, r.traceContext));
    return { r, copied, hooks };
  });
  if (!created.r.created) {
    checkSame(await deps.storage.getInstance(created.r.instanceId), instanceId, "fork");
    return { instanceId: created.r.instanceId, status: created.r.status, created: false, copiedEvents: 0, webhooks: await forkedWebhooks(deps, created.r.instanceId) };
  }
  const webhooks = created.hooks.map((h) => ({ id: h.hookId, url: links.find((l) => l.hookId === h.hookId)!.url, status: h.status, expiresAt: h.expiresAt?.toISOString() ?? null }));
  return { instanceId: created.r.instanceId, status: created.r.status, created: true, copiedEvents: created.copied, webhooks };
}

/** A fork that already exists (the same request id again): its hooks' URLs, derived again from its history. */
async function forkedWebhooks(deps: Uses<"storage" | "webhookLinks">, forkId: string): Promise<ForkedWebhook[]> {
  if (!deps.webhookLinks) return [];
  const links = await webhookLinksOf(deps.webhookLinks, forkId, webhookCreations(await deps.storage.loadHistory(forkId)));
  const rows = await deps.storage.listWaitWebhooks(forkId, 100);
  return links.flatMap((l) => {
    const row = rows.find((r) => r.hookId === l.hookId);
    return row ? [{ id: l.hookId, url: l.url, status: row.status, expiresAt: row.expiresAt?.toISOString() ?? null }] : [];
  });
}
