/**
 * Flow control, engine side (storage/flow-control.ts holds the rules, under
 * per-key advisory locks in the creating transaction):
 *
 * - concurrency: a start is created `running` or `queued`; when an instance
 *   of a keyed workflow ends, its key's oldest queued instances are promoted
 *   into the free slots (after the ending commit, in its invocation; the sweeper's `concurrency`
 *   task for an end whose post-commit promotion was lost).
 * - rateLimit: a start is created `running` (admitted now) or `queued`; the
 *   queue is admitted in order as the window makes room, by a wake-up at
 *   that instant (the dispatcher's `wakeIn`, which fires `fireDueTimers`)
 *   and by the sweeper's `timed_starts` task.
 * - debounce: a start collapses into the key's pending instance or creates
 *   it `queued`; it starts once due, woken the same two ways.
 * - singleton: a start while the key has an unfinished instance returns it.
 */
import type { Workflow } from "../core/definitions.ts";
import { TerminalError } from "../core/errors.ts";
import { flowKey } from "../core/flow-control.ts";
import type { InstanceStatus } from "../core/model.ts";
import type { NewInstance, Storage } from "../storage/types.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";

/** The flow-control columns of a new instance. */
export type FlowFields = Pick<NewInstance, "status" | "concurrencyKey" | "rateKey" | "singletonKey" | "debounceKey" | "notBeforeSeconds">;

export interface FlowKeys {
  concurrency: string | null;
  rate: string | null;
  singleton: string | null;
  debounce: string | null;
}

/**
 * The keys of `input`, or null for a workflow without flow control. Called
 * before anything is stored: a key function that throws or returns no usable
 * string is a ValidationError.
 */
export function flowKeys(wf: Workflow, input: unknown): FlowKeys | null {
  const { concurrency, rateLimit, singleton, debounce } = wf.options;
  if (!concurrency && !rateLimit && !singleton && !debounce) return null;
  const name = wf.workflowName;
  return {
    concurrency: concurrency ? flowKey(name, "concurrency", concurrency.key, input) : null,
    rate: rateLimit ? flowKey(name, "rateLimit", rateLimit.key, input) : null,
    singleton: singleton ? flowKey(name, "singleton", singleton.key, input) : null,
    debounce: debounce ? flowKey(name, "debounce", debounce.key, input) : null,
  };
}

export interface ControlledStart {
  instanceId: string;
  status: InstanceStatus;
  created: boolean;
  /** When a queued start may be admitted (rate window, debounce period): the caller asks for a wake-up then. */
  wakeInSeconds?: number;
}

/**
 * Create (or find) the instance under its keys' locks, in one transaction.
 * Locks are taken in one order — singleton, then debounce, concurrency or
 * rate — so racing starts never deadlock. A child start cannot take another
 * instance's place, so singleton and debounce workflows are not children.
 */
export async function createControlled(
  storage: Storage,
  wf: Workflow,
  keys: FlowKeys,
  inputData: string,
  isChild: boolean,
  create: (s: Storage, flow: FlowFields) => Promise<{ created: boolean; instance: { instanceId: string; status: InstanceStatus } }>,
): Promise<ControlledStart> {
  if (isChild && (keys.singleton || keys.debounce)) {
    throw new TerminalError(`workflow "${wf.workflowName}" has ${keys.singleton ? "singleton" : "debounce"}: a start may return another instance, so it cannot be started as a child`);
  }
  return storage.transaction(async (tx) => {
    if (keys.singleton) {
      const holder = await tx.singletonHolder(keys.singleton);
      if (holder) return { ...holder, created: false };
    }
    const flow: FlowFields = { ...(keys.singleton ? { singletonKey: keys.singleton } : {}) };
    let wakeInSeconds: number | undefined;
    const db = wf.options.debounce;
    if (keys.debounce && db) {
      const into = await tx.debounceInto(keys.debounce, inputData, db.periodSeconds, db.maxWaitSeconds ?? null);
      if (into) return { instanceId: into.instanceId, status: "queued", created: false, wakeInSeconds: into.dueInSeconds };
      Object.assign(flow, { debounceKey: keys.debounce, notBeforeSeconds: db.periodSeconds, status: "queued" });
      wakeInSeconds = db.periodSeconds;
    }
    if (keys.concurrency) {
      Object.assign(flow, { concurrencyKey: keys.concurrency, status: await tx.admitConcurrency(keys.concurrency, wf.options.concurrency!.limit) });
    }
    const rl = wf.options.rateLimit;
    if (keys.rate && rl) {
      const r = await tx.admitRate(keys.rate, rl.limit, rl.periodSeconds);
      Object.assign(flow, { rateKey: keys.rate, status: r.status });
      if (r.status === "queued") wakeInSeconds = r.nextInSeconds;
    }
    const { created, instance } = await create(tx, flow);
    return { instanceId: instance.instanceId, status: instance.status, created, ...(created && wakeInSeconds !== undefined ? { wakeInSeconds } : {}) };
  });
}

// --- concurrency keys ----------------------------------------------------------

function limitOf(deps: Uses<"workflows">, key: string): number | null {
  const name = key.slice(0, key.indexOf(":"));
  return deps.workflows.get(name)?.options.concurrency?.limit ?? null;
}

/** Promote and dispatch the queued instances a key has room for. */
export async function promoteKey(deps: Uses<"dispatcher" | "storage" | "workflows">, key: string, scope?: DispatchScope): Promise<number> {
  const limit = limitOf(deps, key);
  if (limit === null) return 0;
  const ids = await deps.storage.transaction((tx) => tx.promoteQueued(key, limit));
  for (const instanceId of ids) deps.dispatcher.dispatch({ instanceId }, scope);
  return ids.length;
}

/**
 * After an instance ended (post-commit): free its slot for the next in line.
 * The work joins the ending invocation's scope, so on Workers it finishes
 * before the invocation's database closes and its dispatch takes that
 * invocation's queue send; a failure is logged and left to the sweeper.
 */
export function slotFreed(deps: Uses<"dispatcher" | "storage" | "workflows">, instance: { instanceId: string; workflowName: string }, scope?: DispatchScope): void {
  if (!deps.workflows.get(instance.workflowName)?.options.concurrency) return;
  const p = (async () => {
    const key = await deps.storage.concurrencyKeyOf(instance.instanceId);
    if (key) await promoteKey(deps, key, scope);
  })().catch((err: unknown) => console.error("edda: promoting queued instances failed (the sweeper will)", err));
  scope?.waitUntil?.(p);
}

const namesWith = (deps: Uses<"workflows">, option: "concurrency" | "rateLimit" | "debounce") =>
  [...deps.workflows.values()].filter((w) => w.options[option]).map((w) => w.workflowName);

/** Sweep task: every key of this app's keyed workflows that has a queue. */
export async function promoteAllQueued(deps: Uses<"dispatcher" | "storage" | "workflows">, limit: number, scope?: DispatchScope): Promise<number> {
  let promoted = 0;
  for (const key of await deps.storage.queuedConcurrencyKeys(namesWith(deps, "concurrency"), limit)) promoted += await promoteKey(deps, key, scope);
  return promoted;
}

// --- rate limits and debounce: starts whose time came ------------------------------

/** Admit what the key's window has room for; while a queue remains, ask for a wake-up when the window next has room. */
async function promoteRateKey(deps: Uses<"dispatcher" | "storage" | "workflows">, key: string, scope?: DispatchScope): Promise<number> {
  const rl = deps.workflows.get(key.slice(0, key.indexOf(":")))?.options.rateLimit;
  if (!rl) return 0;
  const r = await deps.storage.transaction((tx) => tx.promoteRateQueued(key, rl.limit, rl.periodSeconds));
  for (const instanceId of r.ids) deps.dispatcher.dispatch({ instanceId }, scope);
  if (r.nextInSeconds !== null) deps.dispatcher.wakeIn?.(r.nextInSeconds, scope);
  return r.ids.length;
}

/**
 * Admit queued rate-limited instances whose window has room and start due
 * debounced ones (bounded by `limit` keys and instances). Run by every
 * `fireDueTimers` (so a dispatcher wake-up admits them on time) and by the
 * sweeper's `timed_starts` task (the floor when no wake-up fires: a restart,
 * a wake-up beyond the dispatcher's horizon).
 */
export async function startTimedStarts(deps: Uses<"dispatcher" | "storage" | "workflows">, limit: number, scope?: DispatchScope): Promise<number> {
  const rated = namesWith(deps, "rateLimit");
  const debounced = namesWith(deps, "debounce");
  let started = 0;
  if (rated.length > 0) for (const key of await deps.storage.queuedRateKeys(rated, limit)) started += await promoteRateKey(deps, key, scope);
  if (debounced.length > 0) {
    const ids = await deps.storage.startDueDebounced(debounced, limit);
    for (const instanceId of ids) deps.dispatcher.dispatch({ instanceId }, scope);
    started += ids.length;
  }
  return started;
}
