/**
 * Concurrency keys, engine side (storage/flow-control.ts holds the rules).
 * A start takes the key's lock in its transaction and is created `running`
 * or `queued`; when an instance of a keyed workflow ends, its key's oldest
 * queued instances are promoted into the free slots and dispatched. The
 * sweeper's `concurrency` task does the same for every key with a queue, so
 * an end whose post-commit promotion was lost (a crash) still frees its slot.
 */
import type { Workflow } from "../core/definitions.ts";
import { ValidationError } from "../core/errors.ts";
import type { Storage } from "../storage/types.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Engine } from "./engine.ts";

/** `{workflow}:{key(input)}`, or null for a workflow without `concurrency`. */
export function concurrencyKey(wf: Workflow, input: unknown): string | null {
  const cc = wf.options.concurrency;
  if (!cc) return null;
  const key: unknown = cc.key(input);
  if (typeof key !== "string" || key.length === 0 || key.length > 200) {
    throw new ValidationError(`workflow "${wf.workflowName}": concurrency.key(input) must return a non-empty string of at most 200 characters`, [{ path: ["input"], message: "invalid concurrency key" }]);
  }
  return `${wf.workflowName}:${key}`;
}

/** Inside the creating transaction: `running` or `queued` for this key. */
export function admit(storage: Storage, wf: Workflow, key: string): Promise<"running" | "queued"> {
  return storage.admitConcurrency(key, wf.options.concurrency!.limit);
}

function limitOf(engine: Engine, key: string): number | null {
  const name = key.slice(0, key.indexOf(":"));
  return engine.workflows.get(name)?.options.concurrency?.limit ?? null;
}

/** Promote and dispatch the queued instances a key has room for. */
export async function promoteKey(engine: Engine, key: string, scope?: DispatchScope): Promise<number> {
  const limit = limitOf(engine, key);
  if (limit === null) return 0;
  const ids = await engine.storage.transaction((tx) => tx.promoteQueued(key, limit));
  for (const instanceId of ids) engine.dispatcher.dispatch({ instanceId }, scope);
  return ids.length;
}

/** After an instance ended: free its slot for the next in line. */
export async function slotFreed(engine: Engine, instanceId: string, workflowName: string): Promise<void> {
  if (!engine.workflows.get(workflowName)?.options.concurrency) return;
  const key = await engine.storage.concurrencyKeyOf(instanceId);
  if (key) await promoteKey(engine, key);
}

/** Sweep task: every key of this app's keyed workflows that has a queue. */
export async function promoteAllQueued(engine: Engine, limit: number, scope?: DispatchScope): Promise<number> {
  const names = [...engine.workflows.values()].filter((w) => w.options.concurrency).map((w) => w.workflowName);
  let promoted = 0;
  for (const key of await engine.storage.queuedConcurrencyKeys(names, limit)) promoted += await promoteKey(engine, key, scope);
  return promoted;
}
