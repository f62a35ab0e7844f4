/**
 * The Storage contract: everything the engine, the sweeper and the HTTP layer
 * need from Postgres, in Edda's domain words. One implementation
 * (`PgStorage`, over drizzle) serves all three drivers; the contract test suite
 * runs the same cases against each.
 *
 * Time is always the database's `now()` (never the caller's clock), so leases
 * and timers are consistent across workers with skewed clocks.
 *
 * Payloads are stored exactly as given: JSON text (`data_type = 'json'`) or
 * bytes (`'binary'`, bytea). Serialization of user values lives in `core`.
 */
import type { Executor } from "./database.ts";
import type { ChannelMode, HistoryEvent, InstanceStatus, MatchDocument, NewHistoryEvent, Payload } from "../core/model.ts";

// The shared model lives in core/model.ts (a leaf); re-exported for storage's callers.
export type { ChannelMode, HistoryEvent, InstanceStatus, MatchDocument, NewHistoryEvent, Payload } from "../core/model.ts";
export { CANCELLABLE_STATUSES, RUNNABLE_STATUSES, TERMINAL_STATUSES } from "../core/model.ts";

export interface InstanceRecord {
  instanceId: string;
  workflowName: string;
  sourceHash: string;
  ownerService: string;
  status: InstanceStatus;
  currentActivityId: string | null;
  run: number;
  startedAt: Date;
  updatedAt: Date;
  /** Raw JSON text. */
  inputData: string;
  outputData: string | null;
  /** JSON `{ error_type, error_message, stack? }` when failed. */
  errorData: string | null;
  /** JSON `{ cancelled_by, cancelled_at, previous_status }` when cancelled. */
  cancelData: string | null;
  lockedBy: string | null;
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
}

export interface ChildSummary {
  instanceId: string;
  workflowName: string;
  status: InstanceStatus;
  detached: boolean;
}

/** How an instance is ended from outside its steps: cancelled by someone, or failed by its deadline. */
export type InstanceEnd = { kind: "cancel"; cancelledBy: string } | { kind: "timeout"; errorData: string };

export interface ArchivedHistoryEvent extends HistoryEvent {
  run: number;
  archivedAt: Date;
}

export interface NewInstance {
  instanceId: string;
  workflowName: string;
  sourceHash: string;
  ownerService: string;
  inputData: string;
  lockTimeoutSeconds?: number | null;
  /** W3C traceparent of the span that started it (tracing on). */
  traceContext?: string | null;
  parentInstanceId?: string | null;
  parentActivityId?: string | null;
  detached?: boolean;
  /** Workflow timeout, from the database's now(). */
  timeoutSeconds?: number | null;
  /** `{workflow}:{key}` of a workflow with `concurrency`. */
  concurrencyKey?: string | null;
  /** `queued` when no concurrency slot or rate window had room, or while debounced (default `running`). */
  status?: "running" | "queued";
  /** `{workflow}:{key}` of a workflow with `rateLimit`; created `running`, it counts as admitted now. */
  rateKey?: string | null;
  /** `{workflow}:{key}` of a workflow with `singleton`. */
  singletonKey?: string | null;
  /** `{workflow}:{key}` of a workflow with `debounce`, created `queued`, due in `notBeforeSeconds`. */
  debounceKey?: string | null;
  notBeforeSeconds?: number | null;
}

/** Filters shared by listing and counting instances. */
export interface InstanceFilter {
  workflowName?: string;
  startedAfter?: Date;
  startedBefore?: Date;
  /** Literal text contained in the instance id or the input JSON (case-sensitive). */
  search?: string;
}

export interface ListInstancesQuery extends InstanceFilter {
  status?: InstanceStatus | InstanceStatus[];
  /** 1..1000, default 50. */
  limit?: number;
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor?: string | null;
}

export interface InstancePage {
  /** Newest first (started_at DESC, instance_id DESC). */
  instances: InstanceRecord[];
  nextCursor: string | null;
}

/** Who holds a lease: a worker id plus the fencing token of that acquisition. */
export interface Fence {
  instanceId: string;
  workerId: string;
  token: number;
}

export interface LeasedInstance {
  instance: InstanceRecord;
  fence: Fence;
  /** The current run's history in order (only when requested / always for loadLeased). */
  history: HistoryEvent[];
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

/**
 * Everything one step concludes with, written in one fenced statement: if the
 * fence (workerId + token) no longer holds, nothing is written.
 */
export interface StepConclusion {
  status: InstanceStatus;
  currentActivityId?: string | null;
  history?: NewHistoryEvent[];
  compensations?: NewCompensation[];
  /** Registered with ON CONFLICT DO NOTHING: an existing timer keeps its first expiry. */
  timer?: TimerRegistration;
  outputData?: string | null;
  errorData?: string | null;
  /** With status `parked`: the source hash of the code that diverged. */
  parkedHash?: string | null;
  /**
   * Keep the lease for the follow-up step this conclusion dispatches: the token
   * is bumped and the expiry set to now() + `leaseSeconds`. Without it the lease
   * is released.
   */
  handoff?: { leaseSeconds: number };
}

export interface ConcludeResult {
  ok: boolean;
  /** The new fencing token when the lease was handed off. */
  token?: number;
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

export interface NewChannelMessage {
  channel: string;
  /** Generated (UUID) when omitted. */
  messageId?: string;
  data: Payload;
  metadata?: string | null;
  /** Point-to-point: only this instance can ever receive it. */
  targetInstanceId?: string | null;
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

export interface ScheduleRegistration {
  workflowName: string;
  cron: string;
  timezone: string;
  missed: "skip" | "latest";
  /** The first tick after now (null: never). */
  nextRunAt: Date | null;
}

export interface DueSchedule {
  workflowName: string;
  nextRunAt: Date;
  /** The database's clock when the row was claimed. */
  now: Date;
}

export interface ScheduleRecord {
  workflowName: string;
  cron: string;
  timezone: string;
  missed: "skip" | "latest";
  nextRunAt: Date | null;
  lastRunAt: Date | null;
  lastInstanceId: string | null;
}

export interface SubscribeOptions {
  /**
   * Event lookback: a new broadcast subscription also sees the channel's
   * messages published after the instance started (not only later ones).
   */
  lookback?: boolean;
}

export interface WaitingSubscriber {
  instanceId: string;
  channel: string;
  mode: ChannelMode;
  activityId: string;
}

/** A wait that a batched delivery satisfied: the message `seq` was recorded at `activityId`. */
export interface DeliveredWait {
  instanceId: string;
  activityId: string;
  seq: number;
}

export type OutboxStatus = "pending" | "processing" | "published" | "failed" | "invalid" | "expired";

/** The outbox's dead letters: rows the relay set aside (the broker refused them, or they ran out of attempts or age). */
export type DeadLetterStatus = "invalid" | "expired";
export const DEAD_LETTER_STATUSES = ["invalid", "expired"] as const satisfies readonly DeadLetterStatus[];

export interface DeadLetterQuery {
  /** Default: both. */
  status?: DeadLetterStatus[];
  eventType?: string;
  /** 1..1000, default 50. */
  limit?: number;
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor?: string | null;
}

export interface DeadLetterPage {
  /** Newest first (created_at DESC, event_id DESC). */
  events: OutboxRecord[];
  nextCursor: string | null;
}

/** What an operator action on a dead letter found: the row's status before it (null: no such row), and whether it acted. */
export interface DeadLetterAction {
  previousStatus: OutboxStatus | null;
  done: boolean;
}

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

// --- inspection (read-only views for operators: the viewer, tooling) ---------

export interface TimerRecord {
  timerId: string;
  /** The history activity id the firing records. */
  activityId: string;
  expiresAt: Date;
}

export interface GroupMembership {
  group: string;
  joinedAt: Date;
}

/** One finished `recur` run whose history was archived. */
export interface ArchivedRunSummary {
  run: number;
  events: number;
  firstEventAt: Date;
  archivedAt: Date;
}

export interface ChannelSummary {
  channel: string;
  /** Modes of the current subscriptions (empty when nobody subscribes). */
  modes: ChannelMode[];
  subscribers: number;
  /** Subscribers currently suspended in a receive on this channel. */
  waiting: number;
  /** Messages stored (within the retention window). */
  messages: number;
  /**
   * Messages not yet received: point-to-point ones nobody claimed, broadcast
   * ones past some subscriber's cursor, and — on a channel without broadcast
   * subscribers — queue messages nobody claimed.
   */
  pending: number;
  lastPublishedAt: Date | null;
}

export interface ChannelSubscriber extends SubscriptionRecord {
  workflowName: string;
  status: InstanceStatus;
  /** Messages this subscriber could take now. */
  available: number;
}

/** Where work on an instance failed: a step, or a sweep task that picked it. */
export type FailureTask = "step" | "timers" | "message_timeouts" | "channel_delivery" | "retention";

/** A failure to count against an instance (poison isolation). */
export interface InstanceFailure {
  task: FailureTask;
  errorType: string;
  message: string;
  /**
   * Failures in a row after which the instance is set aside (`quarantined`);
   * for a finished instance (retention) it is only left out of the task.
   */
  maxFailures: number;
  /** A step's failure: counted only while this lease holds, and the lease is released. */
  fence?: Fence;
}

export interface HistoryPage {
  events: HistoryEvent[];
  /** Pass as `afterId` for the next page; null when this page is the last. */
  nextAfterId: number | null;
}

export interface Storage {
  /** The executor this storage runs on (database, or the transaction it is bound to). */
  readonly executor: Executor;

  // --- transactions ---------------------------------------------------------
  /**
   * Run `fn` in a transaction (a savepoint when already inside one) with a
   * Storage bound to it. Callbacks registered with `afterCommit` run in order
   * after the top-level COMMIT only; one failing does not stop the others;
   * they are discarded if the transaction or their savepoint rolls back.
   */
  transaction<T>(fn: (tx: TxStorage) => Promise<T>): Promise<T>;
  /** The traceparent recorded when the instance was started (null: none, or no such instance). */
  getTraceContext(instanceId: string): Promise<string | null>;
  /** LISTEN on the database, where the driver supports it (see Database.listen). */
  listen?(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;

  // --- definitions ----------------------------------------------------------
  upsertWorkflowDefinition(workflowName: string, sourceHash: string, sourceCode: string): Promise<void>;

  // --- instances ------------------------------------------------------------
  /** Insert; when the id exists, return the existing row with created=false. */
  createInstance(input: NewInstance): Promise<{ created: boolean; instance: InstanceRecord }>;
  getInstance(instanceId: string): Promise<InstanceRecord | null>;
  listInstances(query: ListInstancesQuery): Promise<InstancePage>;

  // --- leases ---------------------------------------------------------------
  /**
   * One statement: take the lease if the instance is runnable and the lock is
   * free or expired; the token is incremented. With `withHistory`, the history
   * is loaded in the same statement.
   */
  acquireLease(instanceId: string, workerId: string, leaseSeconds: number, opts?: { withHistory?: boolean }): Promise<LeasedInstance | null>;
  /** Load instance + history when `fence` still holds the lease (handed-off lease). One statement. */
  loadLeased(fence: Fence): Promise<LeasedInstance | null>;
  renewLease(fence: Fence, leaseSeconds: number): Promise<boolean>;
  releaseLease(fence: Fence): Promise<boolean>;
  /** Clear expired leases (bounded, SKIP LOCKED); returns the ids now runnable. */
  releaseStaleLeases(limit: number): Promise<string[]>;
  /**
   * Runnable, unlocked instances, oldest update first; with `minIdleSeconds`,
   * only those untouched that long (a fresh one's first dispatch is likely
   * still in flight).
   */
  findResumableInstances(limit: number, minIdleSeconds?: number): Promise<string[]>;

  // --- step conclusion ------------------------------------------------------
  /**
   * The fenced conclusion of a step (see StepConclusion). On a terminal status
   * the instance also leaves its channel subscriptions, groups and timers.
   */
  concludeStep(fence: Fence, conclusion: StepConclusion): Promise<ConcludeResult>;

  // --- history --------------------------------------------------------------
  appendHistory(instanceId: string, events: NewHistoryEvent[]): Promise<void>;
  loadHistory(instanceId: string): Promise<HistoryEvent[]>;
  /** Fenced: archive the current history under the current run, clear it, start run+1 with new input. */
  recurInstance(fence: Fence, newInputData: string): Promise<boolean>;
  loadArchivedHistory(instanceId: string, run?: number): Promise<ArchivedHistoryEvent[]>;

  // --- compensations --------------------------------------------------------
  addCompensations(instanceId: string, comps: NewCompensation[]): Promise<void>;
  /** Newest first (LIFO order). */
  listCompensations(instanceId: string): Promise<CompensationRecord[]>;

  // --- timers ---------------------------------------------------------------
  registerTimer(instanceId: string, timer: TimerRegistration): Promise<void>;
  /**
   * Fire expired timers (bounded, SKIP LOCKED), in one transaction: record
   * `TimerExpired` for the timer's activity id, delete the timer, make the
   * instance `running` if it was `waiting_for_timer`. Returns the instance ids.
   * Timers of quarantined instances wait (they fire once it is resumed).
   */
  fireExpiredTimers(limit: number, onlyInstanceId?: string): Promise<string[]>;
  /** Earliest pending timer expiry (for in-process wake-ups), or null. */
  nextTimerExpiry(): Promise<Date | null>;

  // --- cancellation ---------------------------------------------------------
  /**
   * Status-guarded (running / waiting_*): in one statement, bump the token (an
   * in-flight step's conclusion commits nothing), release the lock, clear
   * timers and waits, and set `compensating` when compensations exist, else
   * `cancelled`. Null when the instance does not exist; `{ ok:false }` with the
   * status when it is not cancellable.
   */
  cancelInstance(instanceId: string, cancelledBy: string): Promise<{ ok: boolean; status: InstanceStatus; previousStatus: InstanceStatus } | null>;
  /**
   * `cancelInstance`, or a deadline's failure (`timeout`: only once
   * `deadline_at` passed by the database's clock; ends `failed` with
   * `errorData`, or `compensating`).
   */
  endInstance(instanceId: string, end: InstanceEnd): Promise<{ ok: boolean; status: InstanceStatus; previousStatus: InstanceStatus } | null>;

  // --- child links, deadlines, parking (lifecycle.ts) -------------------------
  /** Lock an instance row (FOR UPDATE, in a transaction): a parent before its child. */
  lockInstanceRow(instanceId: string): Promise<{ status: InstanceStatus; currentActivityId: string | null } | null>;
  /** Record a child's outcome in its parent if the parent waits on `activityId` (the parent becomes running). */
  recordChildOutcome(parentId: string, activityId: string, event: NewHistoryEvent): Promise<boolean>;
  /** Children a parent's cancellation takes along (not detached, cancellable). */
  listCancellableChildren(parentId: string): Promise<string[]>;
  listChildren(parentId: string, limit: number): Promise<ChildSummary[]>;
  /** Cancellable instances whose deadline passed (bounded). */
  findExpiredDeadlines(limit: number): Promise<string[]>;
  /** Parked instances of a workflow that diverged from other code than `currentHash` → running; their ids. */
  unparkInstances(workflowName: string, currentHash: string, limit: number): Promise<string[]>;
  /** One parked instance → running; false when it is not parked. */
  resumeParked(instanceId: string): Promise<boolean>;

  // --- channels -------------------------------------------------------------
  publishMessage(msg: NewChannelMessage): Promise<ChannelMessageRecord>;
  /**
   * Subscribe (idempotent). A broadcast subscriber's cursor starts at the
   * channel's latest message (it sees only later messages). Throws
   * ChannelModeConflictError when the channel is in use with another mode.
   */
  subscribe(instanceId: string, channel: string, mode: ChannelMode, opts?: SubscribeOptions): Promise<void>;
  unsubscribe(instanceId: string, channel: string): Promise<void>;
  getSubscription(instanceId: string, channel: string): Promise<SubscriptionRecord | null>;
  /**
   * The next message for this subscriber, consumed atomically: broadcast
   * advances its cursor; competing claims it (exactly one claimer wins, SKIP
   * LOCKED); direct / point-to-point messages only for their target.
   * `match`: only broadcast messages whose document contains it, received
   * once per instance (a receipt, the cursor stays); `undefined` uses the
   * match of the wait in progress.
   */
  takeNextMessage(instanceId: string, channel: string, match?: MatchDocument | null): Promise<ChannelMessageRecord | null>;
  /** Mark the subscription as waiting (activity id, the wait's match, optional timeout: a time, or seconds from the database's now). */
  setWaiting(instanceId: string, channel: string, activityId: string, timeout: Date | number | null, match?: MatchDocument | null): Promise<void>;
  /**
   * In a transaction: lock the subscription row if it still waits on
   * `activityId` (FOR UPDATE), so a delivery and a timeout never both win.
   */
  lockWaitingSubscription(instanceId: string, channel: string, activityId: string): Promise<boolean>;
  /**
   * Clear the wait; if it was set and the instance is `waiting_for_message`,
   * the instance becomes `running` in the same statement (a delivery makes it runnable).
   */
  clearWaiting(instanceId: string, channel: string): Promise<void>;
  /**
   * Batched delivery, one transaction under the channel lock: up to `limit`
   * broadcast subscribers of `channel` waiting in a receive each get their
   * next broadcast message (cursor advanced, history event from `record` at
   * the wait's activity id, wait cleared, instance runnable). Subscribers
   * whose rows are locked by someone else (SKIP LOCKED) or that have an
   * unclaimed point-to-point message are left for the per-subscriber path.
   */
  deliverBroadcast(channel: string, limit: number, record: (msg: ChannelMessageRecord) => { eventType: string; data: Payload }): Promise<DeliveredWait[]>;
  /** Subscribers currently waiting on a channel that have a message available. */
  findWaitingSubscribersWithMessages(limit: number, channel?: string): Promise<WaitingSubscriber[]>;
  /** Waits whose timeout passed (bounded, SKIP LOCKED): record `MessageTimeout`, clear the wait, make runnable. */
  expireMessageWaits(limit: number, onlyInstanceId?: string): Promise<string[]>;
  /** Delete messages older than the retention that no claim of a recent message depends on. */
  cleanupChannelMessages(olderThanSeconds: number, limit: number): Promise<number>;

  // --- flow control ---------------------------------------------------------
  /**
   * In a transaction, under the key's lock (held to its end): whether an
   * instance created now may run (`running`: fewer than `limit` unfinished,
   * unqueued instances hold the key and none is queued before it) or must
   * wait (`queued`).
   */
  admitConcurrency(key: string, limit: number): Promise<"running" | "queued">;
  /** Under the key's lock: promote the oldest queued instances into the free slots; returns their ids. */
  promoteQueued(key: string, limit: number): Promise<string[]>;
  /** Concurrency keys of these workflows that have queued instances (bounded). */
  queuedConcurrencyKeys(workflowNames: string[], limit: number): Promise<string[]>;
  concurrencyKeyOf(instanceId: string): Promise<string | null>;
  /**
   * In a transaction, under the rate key's lock: `running` when fewer than
   * `limit` instances of the key were admitted in the last `periodSeconds`
   * and none is queued, else `queued`; `nextInSeconds`: when the window has
   * room again (0: now).
   */
  admitRate(key: string, limit: number, periodSeconds: number): Promise<{ status: "running" | "queued"; nextInSeconds: number }>;
  /** Under the rate key's lock: admit the oldest queued instances the window has room for; `nextInSeconds` is null once the queue is empty. */
  promoteRateQueued(key: string, limit: number, periodSeconds: number): Promise<{ ids: string[]; nextInSeconds: number | null }>;
  /** Rate keys of these workflows that have queued instances (bounded). */
  queuedRateKeys(workflowNames: string[], limit: number): Promise<string[]>;
  /** In a transaction, under the singleton key's lock (held to its end): the key's unfinished instance, if any. */
  singletonHolder(key: string): Promise<{ instanceId: string; status: InstanceStatus } | null>;
  /**
   * In a transaction, under the debounce key's lock: collapse a start into
   * the key's pending (`queued`) instance — its input becomes `inputData`,
   * its start moves to `periodSeconds` from now (at most `maxWaitSeconds`
   * after its creation). Null when the key has no pending instance.
   */
  debounceInto(key: string, inputData: string, periodSeconds: number, maxWaitSeconds: number | null): Promise<{ instanceId: string; dueInSeconds: number } | null>;
  /** Start the debounced instances of these workflows whose time came (bounded); returns their ids. */
  startDueDebounced(workflowNames: string[], limit: number): Promise<string[]>;

  // --- schedules ------------------------------------------------------------
  /** Upsert schedule rows; a changed cron/time zone/policy resets the next run, an unchanged row is not written. */
  registerSchedules(regs: ScheduleRegistration[]): Promise<void>;
  /** In a transaction: due rows of these workflows, FOR UPDATE SKIP LOCKED. */
  claimDueSchedules(workflowNames: string[], limit: number): Promise<DueSchedule[]>;
  advanceSchedule(workflowName: string, next: Date | null, ran: { at: Date; instanceId: string } | null): Promise<void>;
  listSchedules(workflowNames: string[]): Promise<ScheduleRecord[]>;

  // --- groups ---------------------------------------------------------------
  joinGroup(instanceId: string, group: string): Promise<void>;
  leaveGroup(instanceId: string, group: string): Promise<void>;
  groupMembers(group: string): Promise<string[]>;

  // --- outbox ---------------------------------------------------------------
  addOutboxEvent(event: NewOutboxEvent): Promise<void>;
  /** Claim due pending/failed rows (SKIP LOCKED), marking them `processing` so no one sends them twice. */
  claimOutboxEvents(limit: number, eventIds?: string[]): Promise<OutboxRecord[]>;
  markOutboxPublished(eventId: string): Promise<void>;
  markOutboxInvalid(eventId: string, error: string): Promise<void>;
  /** Back to `failed` with retry_count+1 and the next attempt `retryInSeconds` later. */
  markOutboxFailed(eventId: string, error: string, retryInSeconds: number): Promise<void>;
  /** A claimed row whose send never left (the invocation's subrequest limit): back to due, no attempt counted. */
  releaseOutboxClaim(eventId: string): Promise<void>;
  /** Pending/failed rows older than the max age (counted from a re-arm, if any) or out of attempts → `expired`. */
  expireOutboxEvents(olderThanSeconds: number, maxRetries: number): Promise<number>;
  /** A page of dead letters (`invalid`, `expired`), newest first. Bad cursor → InvalidArgumentError. */
  listDeadLetters(query: DeadLetterQuery): Promise<DeadLetterPage>;
  /** A dead letter back to `pending`, due now, attempts reset, its age counted from now; any other row is left as it is. */
  rearmOutboxEvent(eventId: string): Promise<DeadLetterAction>;
  /** Delete a dead letter; any other row is left as it is. */
  discardOutboxEvent(eventId: string): Promise<DeadLetterAction>;

  // --- CloudEvents dedupe ---------------------------------------------------
  /** True the first time `(source, id)` is seen. */
  recordCloudEvent(source: string, id: string): Promise<boolean>;

  // --- inspection (read-only) ------------------------------------------------
  /** Instances per status under the filter (statuses with none are 0). */
  countInstancesByStatus(filter: InstanceFilter): Promise<Record<InstanceStatus, number>>;
  listSubscriptions(instanceId: string): Promise<SubscriptionRecord[]>;
  listTimers(instanceId: string): Promise<TimerRecord[]>;
  listGroups(instanceId: string): Promise<GroupMembership[]>;
  /** Archived `recur` runs, newest first. */
  listArchivedRuns(instanceId: string): Promise<ArchivedRunSummary[]>;
  /** Channels with messages or subscribers, most recently active first. */
  channelOverview(limit: number): Promise<ChannelSummary[]>;
  channelSubscribers(channel: string, limit: number): Promise<ChannelSubscriber[]>;
  /** Pending messages of a channel (see ChannelSummary.pending), oldest first. */
  pendingMessages(channel: string, limit: number): Promise<ChannelMessageRecord[]>;

  // --- poison isolation and retention ---------------------------------------
  /**
   * Count a failure against an instance, in one statement: failure count + 1,
   * the failure stored, the lease released (a step's, fenced) — and at
   * `maxFailures` a live instance becomes `quarantined` (token bumped, so no
   * in-flight work on it commits). Returns the instance's status and count
   * after, or null when the guard did not match (lease lost, finished,
   * already quarantined, or held by a live step).
   */
  recordInstanceFailure(instanceId: string, failure: InstanceFailure): Promise<{ status: InstanceStatus; failureCount: number } | null>;
  /**
   * An operator's retry of a quarantined instance: back to the status it had
   * (its timers and waits were kept), count reset. False unless quarantined.
   */
  resumeQuarantined(instanceId: string): Promise<{ ok: boolean; status: InstanceStatus } | null>;
  /** Instances with a due timer or an expired message wait, for the one-at-a-time fallback (no locks taken). */
  findDueInstances(kind: "timers" | "message_timeouts", limit: number): Promise<string[]>;
  /**
   * Delete finished instances past the retention (history, archived runs,
   * compensations, timers, subscriptions, claims go with them), bounded,
   * SKIP LOCKED; instances whose purge kept failing are left out. Returns the ids.
   */
  purgeFinishedInstances(olderThanSeconds: number, limit: number, opts?: { onlyInstanceId?: string; maxFailures?: number }): Promise<string[]>;
  /** Finished instances the purge would take (read-only), for the one-at-a-time fallback. */
  findPurgeableInstances(olderThanSeconds: number, limit: number, maxFailures?: number): Promise<string[]>;
  /** Delete CloudEvent dedupe rows older than the retention (bounded). */
  purgeCloudEventDedupe(olderThanSeconds: number, limit: number): Promise<number>;
  /** One page of the current run's history, in order, after the row `afterId` (0: from the start). */
  loadHistoryPage(instanceId: string, afterId: number, limit: number): Promise<HistoryPage>;

  // --- system locks ---------------------------------------------------------
  tryAcquireSystemLock(name: string, holder: string, leaseSeconds: number): Promise<boolean>;
  renewSystemLock(name: string, holder: string, leaseSeconds: number): Promise<boolean>;
  releaseSystemLock(name: string, holder: string): Promise<void>;
}

export interface TxStorage extends Storage {
  afterCommit(cb: () => void | Promise<void>): void;
}
