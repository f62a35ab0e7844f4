/**
 * The contexts user code sees. `WorkflowContext` is what a workflow function
 * gets (deterministic: no I/O through it, only Edda operations);
 * `ActivityContext` is what an activity gets (the step's transaction, an
 * idempotency key for external calls).
 *
 * The replay state is not part of these types: `operation.ts` keeps it in a
 * WeakMap keyed by the context, as `engine/execute.ts` keeps an activity's
 * engine internals.
 */
import type { PgQueryResultHKT, PgTransaction } from "drizzle-orm/pg-core";
import type { ExtractTablesWithRelations } from "drizzle-orm";

/** A drizzle transaction on whichever driver the app uses. */
export type Transaction = PgTransaction<PgQueryResultHKT, Record<string, never>, ExtractTablesWithRelations<Record<string, never>>>;

export interface WorkflowContext {
  readonly instanceId: string;
  readonly workflowName: string;
  /** The recur generation (1 for the first run). */
  readonly run: number;
  /** True while the code is re-running recorded history. */
  readonly isReplaying: boolean;
  /**
   * Finish this run and start the next under the same instance id with a fresh
   * history and `input`, keeping channel subscriptions and group memberships.
   */
  recur(input: unknown): Promise<never>;
  /**
   * The current time, recorded once and replayed identically. Use it instead
   * of `Date.now()` / `new Date()` in workflow code (see docs/design.md).
   */
  now(): Promise<Date>;
  /** A random number in [0, 1), recorded once and replayed identically (instead of `Math.random()`). */
  random(): Promise<number>;
  /** A random UUID (v4), recorded once and replayed identically. */
  uuid(): Promise<string>;
}

export interface ActivityContext {
  readonly instanceId: string;
  readonly workflowName: string;
  readonly activityId: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** `{instanceId}:{activityId}` — stable across retries and crashes; pass it to external APIs. */
  readonly idempotencyKey: string;
  /** The step's transaction (transactional activities only; throws otherwise). */
  readonly tx: Transaction;
  /** Run `fn` in a nested transaction (a savepoint). */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /**
   * Aborts when this attempt's outcome can no longer be recorded: the step's
   * lease was lost (it expired and the sweeper or another worker took the
   * instance over) or the instance was cancelled. Detected by the lease
   * renewal, so within a third of the shorter of the lease and hand-off
   * lease (10 s by default). Pass it to `fetch` and other long calls so they
   * stop; the reason is a `LeaseLostError`.
   */
  readonly signal: AbortSignal;
  /**
   * This attempt's live stream (tokens, progress): readers of
   * `GET /instances/:id/stream` see the items within ~50 ms. Items carry the
   * attempt number; when a later attempt of this activity streams, a `retry`
   * marker precedes its items (see docs/design.md, Realtime streams).
   */
  readonly stream: ActivityStream;
}

export interface ActivityStream {
  /**
   * Buffer one item (JSON value or bytes, at most 64 KiB encoded). Returns at
   * once; items are written in batches. Throws StreamLimitError for an item
   * too large, after `close()`, or once the stream's budget is spent.
   */
  write(data: unknown, opts?: { topic?: string }): void;
  /** Write what is buffered and end this attempt's stream; later writes throw. */
  close(): Promise<void>;
}
