/**
 * Poison isolation, engine side: which failures count against a row, and the
 * one-at-a-time fallback every row-picking task uses when a batch fails.
 *
 * A failure counts against an instance only when the database answered with
 * an error about the statement itself. A lost connection, a restart, a
 * deadlock or serialization failure, a statement timeout or too many
 * connections says nothing about the row: the work is simply retried by the
 * next sweep and nothing is counted, so database faults never quarantine
 * healthy instances.
 */
import type { FailureTask, Fence, InstanceStatus, Storage } from "../storage/types.ts";

/** Failures in a row after which an instance is set aside as `quarantined` (default). */
export const DEFAULT_QUARANTINE_AFTER = 5;

/** SQLSTATE classes and codes that describe the connection or the moment, not the row. */
const TRANSIENT_SQLSTATE = /^(08|53|57|58|40001|40P01|55P03|55006)/;

/** Error codes of the drivers and the runtime for a connection that failed or went away. */
const TRANSIENT_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
]);

/** True when the error (or a cause, as drivers and drizzle wrap them) is about the connection or the moment. */
export function isTransientFailure(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") {
      if (/^[0-9A-Z]{5}$/.test(code)) return TRANSIENT_SQLSTATE.test(code);
      if (TRANSIENT_CODES.has(code)) return true;
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === "string" && /connection (terminated|closed|ended|refused|reset)|socket hang up|Connection terminated|terminating connection/i.test(message)) return true;
  }
  return false;
}

/**
 * Narrower than transient: the connection itself went away (class 08, the
 * server shutting down or restarting, a driver's closed or refused socket),
 * so the same step on a fresh connection is expected to succeed. A statement
 * timeout, a deadlock or too many connections are transient but not this.
 */
export function isConnectionLost(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (/^(08|57P0[123])/.test(code) || TRANSIENT_CODES.has(code))) return true;
  }
  return false;
}

/** What is stored of a failure: the innermost database error says most (drizzle wraps it in "Failed query: …"). */
export function describeFailure(err: unknown): { errorType: string; message: string } {
  let e: unknown = err;
  for (let depth = 0; depth < 6; depth++) {
    const cause = e && typeof e === "object" ? (e as { cause?: unknown }).cause : undefined;
    if (!(cause instanceof Error)) break;
    e = cause;
  }
  if (e instanceof Error) return { errorType: e.name || "Error", message: e.message.slice(0, 500) };
  return { errorType: "Error", message: String(e).slice(0, 500) };
}

/** One row that failed in a task, as a sweep reports it. */
export interface RowFailure {
  task: FailureTask;
  instanceId: string;
  errorType: string;
  message: string;
  /** This failure reached the limit: the instance was set aside (quarantined, or for retention left out). */
  setAside: boolean;
}

export interface Isolation {
  storage: Storage;
  maxFailures: number;
  /** Collects the failures (the sweep report's `rowFailures`). */
  failures: RowFailure[];
  /** Rows that already failed in this sweep are not tried again by it. */
  failedIds: Set<string>;
}

/**
 * Count a failure of `task` on `instanceId`, unless it is transient (then the
 * error is rethrown: the task fails as a whole and the next sweep retries).
 */
export async function countFailure(iso: Isolation, task: FailureTask, instanceId: string, err: unknown): Promise<void> {
  if (isTransientFailure(err)) throw err;
  iso.failedIds.add(instanceId);
  const { errorType, message } = describeFailure(err);
  const after = await iso.storage.recordInstanceFailure(instanceId, { task, errorType, message, maxFailures: iso.maxFailures });
  const setAside = after !== null && (after.status === ("quarantined" satisfies InstanceStatus) || after.failureCount >= iso.maxFailures);
  iso.failures.push({ task, instanceId, errorType, message, setAside });
  console.error(`edda: ${task} failed for instance ${instanceId}${setAside ? " (set aside after repeated failures)" : ""}: ${errorType}: ${message}`);
}

/**
 * Run a batch; if it fails for a reason that is not transient, run the
 * candidates one at a time so a poison row fails alone: each failure is
 * counted on its instance and the rest go through. Returns what the batch
 * (or the successful singles) returned.
 */
export async function batchOrEach<T>(
  iso: Isolation,
  task: FailureTask,
  batch: () => Promise<T[]>,
  candidates: () => Promise<string[]>,
  one: (instanceId: string) => Promise<T[]>,
): Promise<T[]> {
  try {
    return await batch();
  } catch (err) {
    if (isTransientFailure(err)) throw err;
    const done: T[] = [];
    for (const id of await candidates()) {
      if (iso.failedIds.has(id)) continue;
      try {
        done.push(...(await one(id)));
      } catch (e) {
        await countFailure(iso, task, id, e);
      }
    }
    return done;
  }
}

/**
 * A step threw (not a lease loss): give the lease back so the instance is
 * retried soon; a failure that is not transient is counted, and at the limit
 * the instance is quarantined with it. Never throws. False when the database
 * did not answer: the lease is still held (the caller releases it once the
 * database is back, see `redispatchSoon` in step.ts).
 */
export async function stepFailed(storage: Storage, fence: Fence, err: unknown, maxFailures: number, onQuarantined?: () => void): Promise<boolean> {
  try {
    if (isTransientFailure(err)) {
      await storage.releaseLease(fence);
      return true;
    }
    const { errorType, message } = describeFailure(err);
    const after = await storage.recordInstanceFailure(fence.instanceId, { task: "step", errorType, message, maxFailures, fence });
    if (after?.status === "quarantined") {
      console.error(`edda: instance ${fence.instanceId} quarantined after ${after.failureCount} failed steps: ${errorType}: ${message}`);
      onQuarantined?.();
    }
    return true;
  } catch {
    return false;
  }
}
