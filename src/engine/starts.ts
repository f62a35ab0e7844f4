/**
 * Starting an instance: validate its input, record its workflow's
 * definition, create it (under flow control's admission when the workflow
 * has keys), and after the commit run the start hook and dispatch its first
 * step. Used by `Engine.start`, child starts (lifecycle.ts) and cron ticks
 * (schedules.ts), on whichever storage they pass — the caller's transaction
 * included.
 */
import type { Workflow } from "../core/definitions.ts";
import { ConflictError, ValidationError } from "../core/errors.ts";
import type { InstanceStatus } from "../core/model.ts";
import { toStoredJson } from "../core/serialization.ts";
import { checkTags, type Tags } from "../core/tags.ts";
import type { Fence, InstanceRecord, Storage } from "../storage/types.ts";
import type { Uses } from "./deps.ts";
import type { DispatchScope } from "./dispatcher.ts";
import { createControlled, flowKeys, type FlowFields } from "./flow-control.ts";

export interface StartOptions {
  instanceId?: string;
  /** W3C traceparent the run's trace continues (e.g. a CloudEvent's `traceparent` extension). */
  traceparent?: string;
  /**
   * Order within a flow-control key's queue (concurrency, rate limit): higher
   * leaves first, then the oldest; default 0. It never lets an instance past a
   * limit, only ahead of others waiting for the same key.
   */
  priority?: number;
}

/** What the engine's own starts add: a rerun or fork links to the instance it was made from (repairs.ts). */
export interface CreateOptions extends StartOptions {
  origin?: { instanceId: string; kind: "rerun" | "fork"; activityId: string | null };
  /** Create it leased to this worker for its first step (a workflow without flow-control keys only). */
  lease?: { workerId: string; leaseSeconds: number };
}

/** Bounds of `StartOptions.priority` (an integer). */
export const PRIORITY_MIN = -1_000_000;
export const PRIORITY_MAX = 1_000_000;

/** How a child is linked to its parent. */
export interface ParentLink {
  parentInstanceId: string;
  parentActivityId: string | null;
  detached: boolean;
}

export interface Created {
  instanceId: string;
  status: InstanceStatus;
  created: boolean;
  traceContext: string | null;
  /** A queued rate-limited or debounced start is admitted after this long (flow-control.ts). */
  wakeInSeconds?: number;
  /** Created leased (CreateOptions.lease): the row as stored, and the fence its first step holds. */
  leased?: { instance: InstanceRecord; fence: Fence };
}

/** Check the input against the workflow's schema; returns the parsed value. */
export function validateInput(wf: Workflow, input: unknown): unknown {
  if (!wf.options.input) return input;
  const parsed = wf.options.input.safeParse(input);
  if (!parsed.success) throw new ValidationError(`input for workflow "${wf.workflowName}" is invalid`, parsed.error.issues);
  return parsed.data;
}

/** Create an instance whose input is already validated, on `storage` (possibly a transaction); `link` makes it a child. */
export async function createValidated(
  deps: Uses<"definitions" | "deployment" | "tracing" | "serviceName">,
  storage: Storage,
  wf: Workflow,
  value: unknown,
  opts: CreateOptions,
  link?: ParentLink,
): Promise<Created> {
  if (opts.instanceId !== undefined && !/^[A-Za-z0-9_.:-]{1,200}$/.test(opts.instanceId)) {
    throw new ValidationError("instanceId must be 1–200 characters of A-Z a-z 0-9 _ . : -", [{ path: ["instanceId"], message: "invalid instance id" }]);
  }
  if (opts.priority !== undefined && !(Number.isInteger(opts.priority) && opts.priority >= PRIORITY_MIN && opts.priority <= PRIORITY_MAX)) {
    throw new ValidationError(`priority must be an integer from ${PRIORITY_MIN} to ${PRIORITY_MAX}`, [{ path: ["priority"], message: "invalid priority" }]);
  }
  const keys = flowKeys(wf, value); // before anything is stored: a bad key is a ValidationError
  const tags = startTags(wf, value); // likewise
  const sourceHash = await deps.definitions.hash(wf);
  const deployment = await deps.deployment();
  const instanceId = opts.instanceId ?? crypto.randomUUID();
  const traceContext = deps.tracing?.started(wf.workflowName, instanceId, opts.traceparent) ?? null;
  const inputData = toStoredJson(value ?? null, `the input of workflow "${wf.workflowName}"`);
  const create = (s: Storage, flow: FlowFields = {}, lease?: CreateOptions["lease"]) =>
    s.createInstance({
      instanceId,
      traceContext,
      workflowName: wf.workflowName,
      sourceHash,
      ownerService: deps.serviceName,
      deployment,
      inputData,
      lockTimeoutSeconds: wf.options.lockTimeoutSeconds ?? null,
      timeoutSeconds: wf.options.timeoutSeconds ?? null,
      tags,
      ...link,
      ...flow,
      ...(opts.priority ? { priority: opts.priority } : {}),
      ...(opts.origin ? { origin: opts.origin } : {}),
      ...(lease ? { lease } : {}),
    });
  // Flow control admits (or collapses) the start under its keys' locks, in the creating transaction (flow-control.ts).
  if (keys) return { ...(await createControlled(storage, wf, keys, inputData, link !== undefined, create)), traceContext };
  // Only a start without keys is created leased: flow control may queue it or hand back another instance.
  const { created, instance } = await create(storage, {}, opts.lease);
  // The id is another workflow's: a conflict, never that other instance passed off as this start's.
  if (!created && instance.workflowName !== wf.workflowName) throw new ConflictError(`instance "${instanceId}" already exists and belongs to workflow "${instance.workflowName}", not "${wf.workflowName}"`);
  const leased = created && opts.lease && instance.lockedBy === opts.lease.workerId ? { instance, fence: { instanceId: instance.instanceId, workerId: opts.lease.workerId, token: instance.lockToken } } : undefined;
  return { instanceId: instance.instanceId, status: instance.status, created, traceContext, ...(leased ? { leased } : {}) };
}

/** The workflow's `tags` of this input, checked (core/tags.ts); a function that throws refuses the start. */
function startTags(wf: Workflow, value: unknown): Tags | null {
  const fn = wf.options.tags;
  if (!fn) return null;
  let tags: unknown;
  try {
    tags = fn(value as never);
  } catch (err) {
    throw new ValidationError(`the tags of workflow "${wf.workflowName}" could not be computed from this input: ${err instanceof Error ? err.message : String(err)}`.slice(0, 500), [{ path: ["tags"], message: "the tags function threw" }]);
  }
  return checkTags(tags, `the tags of workflow "${wf.workflowName}"`);
}

/** After the creating commit: hook + first step (handed the start's lease, when it was created leased). */
export function afterStart(
  deps: Uses<"hooks" | "dispatcher">,
  wf: Workflow,
  instanceId: string,
  input: unknown,
  scope?: DispatchScope,
  traceparent?: string | null,
  lease?: { workerId: string; token: number },
): void {
  deps.hooks.onWorkflowStart?.({ instanceId, workflowName: wf.workflowName, input });
  deps.dispatcher.dispatch({ instanceId, ...(lease ? { lease } : {}), ...(traceparent ? { traceparent } : {}) }, scope);
  // The deadline is enforced by the timer machinery: an in-process wake-up where there is one, else the sweep.
  if (wf.options.timeoutSeconds !== undefined) deps.dispatcher.wakeIn?.(wf.options.timeoutSeconds, scope);
}
