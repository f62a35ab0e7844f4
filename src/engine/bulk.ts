/**
 * Bulk actions by filter (`POST /instances/bulk`): cancel, resume or rerun
 * every instance a list filter matches, as a durable operation.
 *
 * Not a built-in workflow: an operation is one row (storage/repairs.ts) with
 * a cursor over instance ids. A workflow would give durability too, but its
 * activities cannot reach the engine, it would appear in the very lists it
 * filters (a bulk cancel of `running` would match itself), and its history
 * would grow with every batch; the row's cursor is all the state there is.
 *
 * Each batch is one transaction: lock the operation's row (SKIP LOCKED:
 * racing workers skip it), take the next `batchSize` matching instances after
 * the cursor, act on each in a savepoint (one that throws rolls back alone and
 * is counted `failed`), move the cursor and the counters, commit. What an
 * action does after its commit (dispatch, hooks) is registered on the batch's
 * transaction. A worker killed mid-batch rolls the whole batch back and the
 * next worker does it again; a committed batch is never done twice — so each
 * instance is acted on exactly once. Work is driven by the request that
 * created the operation (in its background work) and by the sweep's
 * `bulk_operations` task, batch by batch within their budgets.
 */
import { ConflictError, NotFoundError, ValidationError } from "../core/errors.ts";
import { logError } from "../core/log.ts";
import type { BulkAction, BulkFilter, BulkOperationRecord, TxStorage } from "../storage/types.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { endInstanceTreeIn, resumeIn } from "./lifecycle.ts";
import { REQUEST_ID_PATTERN, rerunIn } from "./repairs.ts";
import { FinishedInstanceError, upgradeInstance } from "./versioning.ts";

export const BULK_ACTIONS: readonly BulkAction[] = ["cancel", "resume", "rerun", "upgrade"];

/**
 * Instances per batch (default). Each costs a handful of statements (a cancel:
 * read, lock, update, children), so a batch is ~100–150 statements in one
 * transaction: over a TCP or WebSocket driver one connection, and well inside
 * a Workers invocation's CPU time. Over a driver that sends each statement as
 * its own fetch, lower it (`bulkBatchSize`) to fit the subrequest budget.
 */
export const BULK_BATCH_SIZE = 25;

export type BulkDeps = Uses<"definitions" | "deployment" | "dispatcher" | "errorClasses" | "hooks" | "serviceName" | "storage" | "tracing" | "workflows">;

export interface BulkRequest {
  filter: BulkFilter;
  action: BulkAction;
  /** Idempotency: the same request id returns the same operation. */
  requestId?: string;
}

/** How many instances `filter` matches now (the dry run's answer, and an operation's `total`). */
export async function countMatching(deps: Uses<"storage">, filter: BulkFilter): Promise<number> {
  const counts = await deps.storage.countInstancesByStatus(filter);
  const statuses = filter.status ?? (Object.keys(counts) as (keyof typeof counts)[]);
  return statuses.reduce((n, s) => n + (counts[s] ?? 0), 0);
}

/** Create the operation (or find the request id's); the caller drives it (`driveBulk`). */
export async function createBulk(deps: Uses<"storage">, req: BulkRequest): Promise<{ operation: BulkOperationRecord; created: boolean }> {
  if (!BULK_ACTIONS.includes(req.action)) throw new ValidationError(`unknown bulk action "${String(req.action)}"`, [{ path: ["action"], message: `one of ${BULK_ACTIONS.join(", ")}` }]);
  if (req.requestId !== undefined && !REQUEST_ID_PATTERN.test(req.requestId)) {
    throw new ValidationError("requestId must be 1–100 characters of A-Z a-z 0-9 _ . : -", [{ path: ["requestId"], message: "invalid request id" }]);
  }
  const operationId = `bulk-${req.requestId ?? crypto.randomUUID()}`;
  const existing = await deps.storage.getBulkOperation(operationId);
  if (existing) return { operation: sameRequest(existing, req), created: false };
  const total = await countMatching(deps, req.filter);
  // Two creates of one request id racing: the loser gets the winner's row, held to the same check.
  const r = await deps.storage.createBulkOperation({ operationId, action: req.action, filter: req.filter, total });
  return r.created ? r : { operation: sameRequest(r.operation, req), created: false };
}

/** A filter as one canonical text (statuses as a set), so the same filter written twice compares equal. */
function filterKey(f: BulkFilter): string {
  return JSON.stringify([f.workflowName ?? null, f.status ? [...new Set(f.status)].sort() : null, f.startedAfter?.toISOString() ?? null, f.startedBefore?.toISOString() ?? null, f.search ?? null, f.deployment ?? null]);
}

/**
 * A request id names one request: reused with the same action and filter it is a retry and gets the
 * operation it made; with another action or filter it is a mistake a client must hear about (409 naming
 * the operation), never a silent answer with the first request's work.
 */
function sameRequest(op: BulkOperationRecord, req: BulkRequest): BulkOperationRecord {
  if (op.action === req.action && filterKey(op.filter) === filterKey(req.filter)) return op;
  const what = op.action !== req.action ? `action ${op.action}` : `another filter (${JSON.stringify(bulkView(op).filter).slice(0, 300)})`;
  throw new ConflictError(`bulk operation "${op.operationId}" already exists for this requestId with ${what}: send the same request to follow it (GET /operations/${op.operationId}), or use a new requestId`);
}

type Outcome = "done" | "skipped";

/** One instance's action, in the batch's savepoint. Not applicable (finished, not quarantined …): skipped. */
async function act(deps: BulkDeps, tx: TxStorage, op: BulkOperationRecord, instanceId: string, scope?: DispatchScope): Promise<Outcome> {
  switch (op.action) {
    case "cancel": {
      const r = await endInstanceTreeIn(deps, tx, instanceId, { kind: "cancel", cancelledBy: `bulk:${op.operationId}` }, scope);
      return r?.ok ? "done" : "skipped";
    }
    case "resume": {
      const r = await resumeIn(deps, tx, instanceId, scope);
      return r?.ok ? "done" : "skipped";
    }
    case "rerun":
      try {
        await rerunIn(deps, tx, instanceId, { requestId: op.operationId }, scope);
        return "done";
      } catch (err) {
        if (err instanceof ConflictError || err instanceof NotFoundError) return "skipped";
        throw err;
      }
    case "upgrade": {
      // A history that does not replay here throws (ConflictError with the mismatch): counted failed, with it.
      const r = await upgradeInstance(deps, tx, instanceId).catch((err: unknown) => {
        if (err instanceof FinishedInstanceError || err instanceof NotFoundError) return null;
        throw err;
      });
      if (!r) return "skipped";
      if (r.moved && r.runnable) tx.afterCommit(() => deps.dispatcher.dispatch({ instanceId }, scope));
      return r.moved ? "done" : "skipped";
    }
  }
}

/** One batch; "busy" when another worker holds the operation, "finished" when none is left. */
export async function runBulkBatch(deps: BulkDeps, operationId: string, batchSize = BULK_BATCH_SIZE, scope?: DispatchScope): Promise<"more" | "finished" | "busy"> {
  return deps.storage.transaction(async (tx) => {
    const op = await tx.claimBulkOperation(operationId);
    if (!op) return (await tx.getBulkOperation(operationId))?.status === "running" ? "busy" : "finished";
    const ids = await tx.bulkBatch(op, batchSize);
    const p = { cursor: op.cursor, done: 0, skipped: 0, failed: 0, errors: [...op.errors], finished: ids.length < batchSize };
    for (const id of ids) {
      try {
        p[await tx.transaction((sp) => act(deps, sp, op, id, scope))]++;
      } catch (err) {
        // A poison instance: its savepoint rolled back, the batch goes on.
        p.failed++;
        p.errors.push({ instanceId: id, error: err instanceof Error ? `${err.name}: ${err.message}`.slice(0, 500) : String(err).slice(0, 500) });
      }
      p.cursor = id;
    }
    await tx.advanceBulkOperation(operationId, p);
    return p.finished ? "finished" : "more";
  });
}

/** Batches of one operation until it finishes, another worker holds it, or `budgetMs` is spent; returns batches run. */
export async function driveBulk(deps: BulkDeps, operationId: string, opts: { budgetMs?: number; batchSize?: number } = {}, scope?: DispatchScope): Promise<number> {
  const until = Date.now() + (opts.budgetMs ?? 20_000);
  let batches = 0;
  while (Date.now() < until) {
    const r = await runBulkBatch(deps, operationId, opts.batchSize, scope);
    if (r === "busy") break;
    batches++;
    if (r === "finished") break;
  }
  return batches;
}

/** After the creating request's answer: drive it in that invocation's background work (the sweep is the floor). */
export function driveInBackground(deps: BulkDeps, operationId: string, opts: { budgetMs?: number; batchSize?: number }, scope?: DispatchScope): void {
  const work = driveBulk(deps, operationId, opts, scope).catch((err: unknown) => logError(`edda: bulk operation ${operationId} stopped (the sweeper will go on)`, err));
  scope?.waitUntil?.(work);
}

/** Sweep task: drive the running operations, oldest first, within `budgetMs`; returns batches run. */
export async function sweepBulk(deps: BulkDeps, budgetMs: number, batchSize = BULK_BATCH_SIZE, scope?: DispatchScope): Promise<number> {
  const until = Date.now() + budgetMs;
  let batches = 0;
  for (const id of await deps.storage.runningBulkOperations(10)) {
    if (Date.now() >= until) break;
    batches += await driveBulk(deps, id, { budgetMs: until - Date.now(), batchSize }, scope);
  }
  return batches;
}

/** What the API shows of an operation (`GET /operations/:id`). */
export interface BulkOperationView {
  operationId: string;
  action: BulkAction;
  filter: { workflow?: string; status?: string[]; startedAfter?: string; startedBefore?: string; search?: string; deployment?: string };
  status: "running" | "completed";
  total: number;
  done: number;
  skipped: number;
  failed: number;
  errors: { instanceId: string; error: string }[];
  createdAt: string;
  updatedAt: string;
}

export function bulkView(op: BulkOperationRecord): BulkOperationView {
  const f = op.filter;
  return {
    operationId: op.operationId,
    action: op.action,
    filter: {
      ...(f.workflowName !== undefined ? { workflow: f.workflowName } : {}),
      ...(f.status ? { status: f.status } : {}),
      ...(f.startedAfter ? { startedAfter: f.startedAfter.toISOString() } : {}),
      ...(f.startedBefore ? { startedBefore: f.startedBefore.toISOString() } : {}),
      ...(f.search !== undefined ? { search: f.search } : {}),
      ...(f.deployment !== undefined ? { deployment: f.deployment } : {}),
    },
    status: op.status,
    total: op.total,
    done: op.done,
    skipped: op.skipped,
    failed: op.failed,
    errors: op.errors,
    createdAt: op.createdAt.toISOString(),
    updatedAt: op.updatedAt.toISOString(),
  };
}
