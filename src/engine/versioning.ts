/**
 * Which code finishes an instance (docs/deploying.md).
 *
 * Each instance is on one deployment (the one that started it, until it moves). Engines take only
 * the instances their deployment may run — one predicate in storage (storage/versioning.ts
 * `mayRun`) in every claim: the step's lease, the dispatchers' hand-offs, the sweep's resumable
 * scan. A workflow's `versioning`:
 *
 * - `auto` (the default): a newer deployment may continue an instance of an older one, but only
 *   when the instance's history replays with its code — verify-replay's check (verify.ts), run once
 *   per instance before its first step on the new code. It passes: the instance moves (its
 *   `deployment` becomes the new one) and the step goes on. It fails: the refusal is recorded on the
 *   instance (so this deployment never checks it again) and the lease goes back; the instance stays
 *   on its deployment.
 * - `pinned`: it always finishes on its deployment, whatever the new code is.
 *
 * An instance whose deployment no engine serves any more waits (`why` = `pinned`, naming the
 * deployment), untouched, until an engine of that deployment runs again or an operator upgrades it
 * (`POST /instances/:id/upgrade`, allowed only when its replay passes on the operator's deployment).
 *
 * The policy that counts is the one of the deployment that would take the instance over: the new
 * code decides whether it wants an old instance.
 */
import { ConflictError, NotFoundError } from "../core/errors.ts";
import type { Workflow } from "../core/definitions.ts";
import { RUNNABLE_STATUSES, type LeasedInstance, type RunsFor, type Storage } from "../storage/types.ts";
import type { Uses } from "./deps.ts";
import { verifyReplay } from "./verify.ts";

export type Versioning = "pinned" | "auto";
export const VERSIONINGS: readonly Versioning[] = ["pinned", "auto"];
/** Without a choice a workflow is `auto`: compatible deploys move its instances, incompatible ones leave them on their code. */
export const DEFAULT_VERSIONING: Versioning = "auto";

export const versioningOf = (wf: Workflow): Versioning => wf.options.versioning ?? DEFAULT_VERSIONING;

/** What an engine of `deployment` over `workflows` may run (cached: one per engine). */
export function runsOf(deployment: () => Promise<string>, workflows: Iterable<Workflow>): () => Promise<RunsFor> {
  const autoWorkflows = [...workflows].filter((wf) => versioningOf(wf) === "auto").map((wf) => wf.workflowName);
  let p: Promise<RunsFor> | undefined;
  return () => (p ??= deployment().then((d) => ({ deployment: d, autoWorkflows })));
}

/**
 * Before the first step of an instance on this deployment's code: check that the code replays its
 * history and move it here, or record the refusal and give the lease back. Null: it moved (the step
 * goes on, `leased` updated); else the reason the step was skipped.
 */
export async function adoptOrRefuse(
  deps: Uses<"storage" | "errorClasses">,
  leased: LeasedInstance,
  wf: Workflow,
  current: string,
): Promise<string | null> {
  const from = leased.instance.deployment;
  const verdict = await verifyReplay(wf, leased.instance, leased.history, deps.errorClasses);
  if (verdict.ok) {
    if (!(await deps.storage.adoptInstance(leased.fence, current))) return "lease lost while moving it to this deployment";
    leased.instance = { ...leased.instance, deployment: current, replayRefusedBy: null, replayRefusedError: null };
    return null;
  }
  await deps.storage.refuseInstance(leased.fence, current, verdict.error);
  return `stays on deployment ${from}: this deployment's code does not replay its history (${verdict.error.slice(0, 300)})`;
}

/** An upgrade of a finished instance: nothing to move (409; a bulk upgrade skips it). */
export class FinishedInstanceError extends ConflictError {}

/** `POST /instances/:id/upgrade`'s answer. */
export interface UpgradeResult {
  instanceId: string;
  /** The deployment it was on. */
  from: string | null;
  /** The deployment it is on now (this one). */
  deployment: string;
  /** False when it was already on this deployment (nothing changed). */
  moved: boolean;
  /** Where the replay stopped on this deployment's code: the next thing it will do. */
  next: string;
  /** It is runnable now (its step is to be dispatched), not waiting. */
  runnable: boolean;
}

/**
 * An operator moves an unfinished instance to this deployment: only when its history replays with this code
 * (else ConflictError with the mismatch, nothing changed). Works for pinned workflows too: the operator
 * decides. A step between the check and the move (the history may have grown) makes it a 409 to retry.
 */
export async function upgradeInstance(deps: Uses<"workflows" | "errorClasses" | "deployment">, storage: Storage, instanceId: string): Promise<UpgradeResult> {
  const inst = await storage.getInstance(instanceId);
  if (!inst) throw new NotFoundError(`instance "${instanceId}" not found`);
  if (inst.status === "completed" || inst.status === "failed" || inst.status === "cancelled") throw new FinishedInstanceError(`instance "${instanceId}" has finished (${inst.status}): there is nothing to upgrade`);
  const wf = deps.workflows.get(inst.workflowName);
  if (!wf) throw new ConflictError(`workflow "${inst.workflowName}" is not registered in this deployment: it cannot run instance "${instanceId}"`);
  const current = await deps.deployment();
  const history = await storage.loadHistory(instanceId);
  const verdict = await verifyReplay(wf, inst, history, deps.errorClasses);
  if (!verdict.ok) throw new ConflictError(`instance "${instanceId}" does not replay with deployment ${current}'s code: ${verdict.error}`);
  const runnable = (RUNNABLE_STATUSES as readonly string[]).includes(inst.status);
  if (inst.deployment === current && inst.replayRefusedBy === null) return { instanceId, from: current, deployment: current, moved: false, next: verdict.next, runnable };
  if (!(await storage.upgradeInstance(instanceId, current, { from: inst.deployment, seenToken: inst.lockToken }))) {
    throw new ConflictError(`instance "${instanceId}" changed while it was checked (a step ran or holds its lease): try again`);
  }
  return { instanceId, from: inst.deployment, deployment: current, moved: inst.deployment !== current, next: verdict.next, runnable };
}
