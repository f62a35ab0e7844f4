/**
 * The rows and views that more than one storage area speaks of (an instance,
 * a fence, a message, an outbox row …): a leaf module, imported by the area
 * modules and by rows.ts, importing nothing but the shared model. Types that
 * belong to one area (its queries, results and options) live in that area's
 * module, next to its interface.
 *
 * Payloads are stored exactly as given: JSON text (`data_type = 'json'`) or
 * bytes (`'binary'`, bytea). Serialization of user values lives in `core`.
 */
import type { ChannelMode, HistoryEvent, InstanceStatus, Payload } from "../core/model.ts";

// The shared model lives in core/model.ts (a leaf); re-exported for storage's callers.
export type { ChannelMode, HistoryEvent, InstanceStatus, MatchDocument, NewHistoryEvent, Payload } from "../core/model.ts";
export { CANCELLABLE_STATUSES, RUNNABLE_STATUSES, TERMINAL_STATUSES } from "../core/model.ts";

/**
 * `locked_by` of a lock a cancel or a deadline kept for the step it fenced out (`{prefix}{worker id}`, token
 * + 1): no acquisition or hand-off writes it, so only that step's give-back (`releaseFencedOut`), the
 * lock's expiry or the stale-lease sweep frees it. Its compensations wait for the step to be over.
 */
export const LOCK_HELD_BY_END = "ended:";

/**
 * One row of `workflow_instances` as storage reads it: the instance's status
 * and where it stands (`currentActivityId`), its run (a `recur` starts run
 * n+1 under the same id), its input and outcome as stored text, its lease
 * (`lockedBy` … `lockTimeoutSeconds`: a step fences its writes with
 * `lockToken`), its place in a parent/child tree and in flow control. Its
 * columns are checked against the table in rows.ts (`instanceRecordColumns`);
 * a lease hands it to the step with the history (leases.ts). Internal: the
 * public shape is `InstanceView` (engine/views.ts `toView`).
 */
export interface InstanceRecord {
  instanceId: string;
  workflowName: string;
  sourceHash: string;
  ownerService: string;
  status: InstanceStatus;
  currentActivityId: string | null;
  run: number;
  startedAt: Date;
  /** The row's last change, or the lease's last hand-off when that is later (a hand-off leaves updated_at). */
  updatedAt: Date;
  /** Raw JSON text. */
  inputData: string;
  outputData: string | null;
  /** JSON `{ error_type, error_message, stack? }` when failed. */
  errorData: string | null;
  /** JSON `{ cancelled_by, cancelled_at, previous_status }` when cancelled. */
  cancelData: string | null;
  lockedBy: string | null;
  /** When the current lease was taken or last handed on. */
  lockedAt: Date | null;
  lockToken: number;
  lockExpiresAt: Date | null;
  lockTimeoutSeconds: number | null;
  /** Set on a child workflow: the instance that started it. */
  parentInstanceId: string | null;
  /** The parent's operation that waits for this child's outcome (`invoke`); null for `startChild`. */
  parentActivityId: string | null;
  /** A detached child is not cancelled with its parent. */
  detached: boolean;
  /** Workflow timeout: the run fails with WorkflowTimeoutError past this instant. */
  deadlineAt: Date | null;
  /** While `parked`: the source hash of the code the replay diverged from. */
  parkedHash: string | null;
  /** Consecutive failures of work on this instance outside a step's ordinary outcome (see InstanceFailure). */
  failureCount: number;
  /** JSON `{ task, error_type, message, at, attempts, previous_status? }` of the latest such failure. */
  failureData: string | null;
  /** Flow-control keys (`{workflow}:{key}`) and instants: see schema.ts. */
  concurrencyKey: string | null;
  rateKey: string | null;
  admittedAt: Date | null;
  singletonKey: string | null;
  debounceKey: string | null;
  notBefore: Date | null;
  /** A rerun or fork: the instance it was made from, how, and (a fork) the activity it resumed at. */
  originInstanceId: string | null;
  originKind: "rerun" | "fork" | null;
  originActivityId: string | null;
  /** Queued admission order within a flow-control key (higher first, then oldest). */
  priority: number;
  /** The deployment that started it; null for instances from before deployments were recorded. */
  deployment: string | null;
  /** A newer deployment whose code does not replay it (it stays on `deployment`), and its mismatch. */
  replayRefusedBy: string | null;
  replayRefusedError: string | null;
}

/**
 * Which instances an engine may run (storage/versioning.ts `mayRun`, the one predicate of every
 * claim): its deployment's, those started before deployments were recorded, and those of its `auto`
 * workflows that an older deployment started and this one has not refused.
 */
export interface RunsFor {
  deployment: string;
  /** This deployment's workflows whose versioning is `auto`. */
  autoWorkflows: readonly string[];
}

export interface ArchivedHistoryEvent extends HistoryEvent {
  run: number;
  archivedAt: Date;
}

/** Filters shared by listing and counting instances. */
export interface InstanceFilter {
  workflowName?: string;
  startedAfter?: Date;
  startedBefore?: Date;
  /** Literal text contained in the instance id or the input JSON (case-sensitive). */
  search?: string;
  /** The deployment it is on (engine/versioning.ts). */
  deployment?: string;
  /** Tags the instance has, each `[key, value]` (all of them: AND). */
  tags?: readonly (readonly [string, string])[];
}

/** Who holds a lease: a worker id plus the fencing token of that acquisition. */
export interface Fence {
  instanceId: string;
  workerId: string;
  token: number;
}

export interface CompensationRecord {
  id: number;
  activityId: string;
  activityName: string;
  /** Raw JSON text of the argument array. */
  args: string;
  createdAt: Date;
}

export interface NewCompensation {
  activityId: string;
  activityName: string;
  args: string;
}

export interface TimerRegistration {
  timerId: string;
  /** The history activity id that the firing records (`TimerExpired`). */
  activityId: string;
  /** Absolute expiry, or relative to the database's now(). One is required. */
  expiresAt?: Date;
  delaySeconds?: number;
}

export interface ChannelMessageRecord {
  /** Monotonic sequence (the table's id). */
  seq: number;
  messageId: string;
  channel: string;
  data: Payload;
  /** Raw JSON text or null. */
  metadata: string | null;
  targetInstanceId: string | null;
  publishedAt: Date;
}

export interface SubscriptionRecord {
  instanceId: string;
  channel: string;
  mode: ChannelMode;
  /** Set while the instance waits on this channel (the receive's activity id). */
  activityId: string | null;
  cursorMessageId: number | null;
  timeoutAt: Date | null;
  subscribedAt: Date;
}

export type OutboxStatus = "pending" | "processing" | "published" | "failed" | "invalid" | "expired";

/** The outbox's dead letters: rows the relay set aside (the broker refused them, or they ran out of attempts or age). */
export type DeadLetterStatus = "invalid" | "expired";

export const DEAD_LETTER_STATUSES = ["invalid", "expired"] as const satisfies readonly DeadLetterStatus[];

export interface NewOutboxEvent {
  eventId: string;
  eventType: string;
  eventSource: string;
  data: Payload;
  contentType?: string;
  /** Raw JSON object text of extra CloudEvents attributes, or null. */
  extensions?: string | null;
}

export interface OutboxRecord extends Required<Omit<NewOutboxEvent, "contentType" | "extensions">> {
  contentType: string;
  extensions: string | null;
  status: OutboxStatus;
  retryCount: number;
  createdAt: Date;
  publishedAt: Date | null;
  lastError: string | null;
  /** When an operator last re-armed it from the dead letters, else null. */
  rearmedAt: Date | null;
}
