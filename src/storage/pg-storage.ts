/**
 * `PgStorage`: the Storage contract over drizzle, for every driver. Each area
 * lives in its own module (instances, leases, history, channels, outbox,
 * locks) as functions of an Executor; this class binds them to one executor
 * (the database, or a transaction) and owns transactions and post-commit
 * callbacks.
 *
 * Post-commit callbacks: each `transaction()` call opens a scope. A nested
 * call (a savepoint) hands its callbacks to the parent scope when the
 * savepoint is released and drops them when it rolls back; the top-level call
 * runs them in registration order after COMMIT, each isolated so that one
 * throwing does not stop the others. A Storage built directly over a drizzle
 * transaction cannot see that transaction's commit, so it refuses `afterCommit`
 * rather than run callbacks too early.
 */
import { PgTransaction } from "drizzle-orm/pg-core";
import * as channels from "./channels.ts";
import * as delivery from "./channel-delivery.ts";
import * as groups from "./groups.ts";
import type { Database, Executor } from "./database.ts";
import * as failures from "./failures.ts";
import * as history from "./history.ts";
import * as inspect from "./inspect.ts";
import * as instances from "./instances.ts";
import * as leases from "./leases.ts";
import * as lifecycle from "./lifecycle.ts";
import * as locks from "./locks.ts";
import * as outbox from "./outbox.ts";
import * as schedules from "./schedules.ts";
import * as flow from "./flow-control.ts";
import type {
  ArchivedHistoryEvent,
  ArchivedRunSummary,
  ChannelSubscriber,
  ChannelSummary,
  ChildSummary,
  InstanceEnd,
  GroupMembership,
  InstanceFilter,
  TimerRecord,
  ChannelMessageRecord,
  ChannelMode,
  MatchDocument,
  SubscribeOptions,
  DueSchedule,
  ScheduleRecord,
  ScheduleRegistration,
  CompensationRecord,
  ConcludeResult,
  DeliveredWait,
  Fence,
  HistoryEvent,
  HistoryPage,
  HistoryPreviewPage,
  InstanceFailure,
  InstancePage,
  InstanceRecord,
  InstanceStatus,
  LeasedInstance,
  ListInstancesQuery,
  NewChannelMessage,
  NewCompensation,
  NewHistoryEvent,
  NewInstance,
  DeadLetterAction,
  DeadLetterPage,
  DeadLetterQuery,
  NewOutboxEvent,
  OutboxRecord,
  Payload,
  StepConclusion,
  Storage,
  SubscriptionRecord,
  TimerRegistration,
  TxStorage,
  WaitingSubscriber,
} from "./types.ts";

type AfterCommit = () => void | Promise<void>;

interface CommitScope {
  callbacks: AfterCommit[];
  /** False once the scope's transaction/savepoint has ended. */
  open: boolean;
  /** True when the outermost transaction was not started by a PgStorage (its commit is invisible). */
  detached: boolean;
}

async function runAfterCommit(callbacks: AfterCommit[]): Promise<void> {
  for (const cb of callbacks) {
    try {
      await cb();
    } catch (err) {
      console.error("edda-edge: afterCommit callback failed", err);
    }
  }
}

export class PgStorage implements Storage {
  /** LISTEN on the database (set by createStorage when the driver can). */
  listen?: Storage["listen"];

  constructor(
    readonly executor: Executor,
    protected readonly scope?: CommitScope,
  ) {}

  async transaction<T>(fn: (tx: TxStorage) => Promise<T>): Promise<T> {
    const parent = this.scope;
    const scope: CommitScope = {
      callbacks: [],
      open: true,
      detached: parent ? parent.detached : this.executor instanceof PgTransaction,
    };
    let result: T;
    try {
      result = await this.executor.transaction((tx) => fn(new PgTxStorage(tx, scope)));
    } finally {
      scope.open = false;
    }
    if (parent) parent.callbacks.push(...scope.callbacks);
    else await runAfterCommit(scope.callbacks);
    return result;
  }

  // --- definitions & instances ---------------------------------------------
  upsertWorkflowDefinition(workflowName: string, sourceHash: string, sourceCode: string): Promise<void> {
    return instances.upsertWorkflowDefinition(this.executor, workflowName, sourceHash, sourceCode);
  }
  createInstance(input: NewInstance): Promise<{ created: boolean; instance: InstanceRecord }> {
    return instances.createInstance(this.executor, input);
  }
  getTraceContext(instanceId: string): Promise<string | null> {
    return instances.getTraceContext(this.executor, instanceId);
  }

  getInstance(instanceId: string): Promise<InstanceRecord | null> {
    return instances.getInstance(this.executor, instanceId);
  }
  listInstances(query: ListInstancesQuery): Promise<InstancePage> {
    return instances.listInstances(this.executor, query);
  }
  cancelInstance(instanceId: string, cancelledBy: string): Promise<{ ok: boolean; status: InstanceStatus; previousStatus: InstanceStatus } | null> {
    return instances.cancelInstance(this.executor, instanceId, cancelledBy);
  }
  endInstance(instanceId: string, end: InstanceEnd): Promise<{ ok: boolean; status: InstanceStatus; previousStatus: InstanceStatus } | null> {
    return instances.endInstance(this.executor, instanceId, end);
  }

  // --- child links, deadlines, parking ----------------------------------------
  lockInstanceRow(instanceId: string): Promise<{ status: InstanceStatus; currentActivityId: string | null } | null> {
    return lifecycle.lockInstanceRow(this.executor, instanceId);
  }
  recordChildOutcome(parentId: string, activityId: string, event: NewHistoryEvent): Promise<boolean> {
    return lifecycle.recordChildOutcome(this.executor, parentId, activityId, event);
  }
  listCancellableChildren(parentId: string): Promise<string[]> {
    return lifecycle.listCancellableChildren(this.executor, parentId);
  }
  listChildren(parentId: string, limit: number): Promise<ChildSummary[]> {
    return lifecycle.listChildren(this.executor, parentId, limit);
  }
  findExpiredDeadlines(limit: number): Promise<string[]> {
    return lifecycle.findExpiredDeadlines(this.executor, limit);
  }
  unparkInstances(workflowName: string, currentHash: string, limit: number): Promise<string[]> {
    return lifecycle.unparkInstances(this.executor, workflowName, currentHash, limit);
  }
  resumeParked(instanceId: string): Promise<boolean> {
    return lifecycle.resumeParked(this.executor, instanceId);
  }

  // --- leases & step conclusion ---------------------------------------------
  acquireLease(instanceId: string, workerId: string, leaseSeconds: number, opts?: { withHistory?: boolean }): Promise<LeasedInstance | null> {
    return leases.acquireLease(this.executor, instanceId, workerId, leaseSeconds, opts?.withHistory ?? false);
  }
  loadLeased(fence: Fence): Promise<LeasedInstance | null> {
    return leases.loadLeased(this.executor, fence);
  }
  renewLease(fence: Fence, leaseSeconds: number): Promise<boolean> {
    return leases.renewLease(this.executor, fence, leaseSeconds);
  }
  releaseLease(fence: Fence): Promise<boolean> {
    return leases.releaseLease(this.executor, fence);
  }
  releaseStaleLeases(limit: number): Promise<string[]> {
    return leases.releaseStaleLeases(this.executor, limit);
  }
  findResumableInstances(limit: number, minIdleSeconds?: number): Promise<string[]> {
    return leases.findResumableInstances(this.executor, limit, minIdleSeconds);
  }
  concludeStep(fence: Fence, conclusion: StepConclusion): Promise<ConcludeResult> {
    return leases.concludeStep(this.executor, fence, conclusion);
  }
  recurInstance(fence: Fence, newInputData: string): Promise<boolean> {
    return leases.recurInstance(this.executor, fence, newInputData);
  }

  // --- history, compensations, timers ---------------------------------------
  appendHistory(instanceId: string, events: NewHistoryEvent[]): Promise<void> {
    return history.appendHistory(this.executor, instanceId, events);
  }
  loadHistory(instanceId: string): Promise<HistoryEvent[]> {
    return history.loadHistory(this.executor, instanceId);
  }
  loadArchivedHistory(instanceId: string, run?: number): Promise<ArchivedHistoryEvent[]> {
    return history.loadArchivedHistory(this.executor, instanceId, run);
  }
  addCompensations(instanceId: string, comps: NewCompensation[]): Promise<void> {
    return history.addCompensations(this.executor, instanceId, comps);
  }
  listCompensations(instanceId: string): Promise<CompensationRecord[]> {
    return history.listCompensations(this.executor, instanceId);
  }
  registerTimer(instanceId: string, timer: TimerRegistration): Promise<void> {
    return history.registerTimer(this.executor, instanceId, timer);
  }
  fireExpiredTimers(limit: number, onlyInstanceId?: string): Promise<string[]> {
    return history.fireExpiredTimers(this.executor, limit, onlyInstanceId);
  }
  nextTimerExpiry(): Promise<Date | null> {
    return history.nextTimerExpiry(this.executor);
  }

  // --- channels & groups ----------------------------------------------------
  admitConcurrency(key: string, limit: number): Promise<"running" | "queued"> {
    return flow.admitConcurrency(this.executor, key, limit);
  }
  promoteQueued(key: string, limit: number): Promise<string[]> {
    return flow.promoteQueued(this.executor, key, limit);
  }
  queuedConcurrencyKeys(workflowNames: string[], limit: number): Promise<string[]> {
    return flow.queuedConcurrencyKeys(this.executor, workflowNames, limit);
  }
  concurrencyKeyOf(instanceId: string): Promise<string | null> {
    return flow.concurrencyKeyOf(this.executor, instanceId);
  }
  admitRate(key: string, limit: number, periodSeconds: number): Promise<{ status: "running" | "queued"; nextInSeconds: number }> {
    return flow.admitRate(this.executor, key, limit, periodSeconds);
  }
  promoteRateQueued(key: string, limit: number, periodSeconds: number): Promise<{ ids: string[]; nextInSeconds: number | null }> {
    return flow.promoteRateQueued(this.executor, key, limit, periodSeconds);
  }
  queuedRateKeys(workflowNames: string[], limit: number): Promise<string[]> {
    return flow.queuedRateKeys(this.executor, workflowNames, limit);
  }
  singletonHolder(key: string): Promise<{ instanceId: string; status: InstanceStatus } | null> {
    return flow.singletonHolder(this.executor, key);
  }
  debounceInto(key: string, inputData: string, periodSeconds: number, maxWaitSeconds: number | null): Promise<{ instanceId: string; dueInSeconds: number } | null> {
    return flow.debounceInto(this.executor, key, inputData, periodSeconds, maxWaitSeconds);
  }
  startDueDebounced(workflowNames: string[], limit: number): Promise<string[]> {
    return flow.startDueDebounced(this.executor, workflowNames, limit);
  }
  registerSchedules(regs: ScheduleRegistration[]): Promise<void> {
    return schedules.registerSchedules(this.executor, regs);
  }
  claimDueSchedules(workflowNames: string[], limit: number): Promise<DueSchedule[]> {
    return schedules.claimDueSchedules(this.executor, workflowNames, limit);
  }
  advanceSchedule(workflowName: string, next: Date | null, ran: { at: Date; instanceId: string } | null): Promise<void> {
    return schedules.advanceSchedule(this.executor, workflowName, next, ran);
  }
  listSchedules(workflowNames: string[]): Promise<ScheduleRecord[]> {
    return schedules.listSchedules(this.executor, workflowNames);
  }
  publishMessage(msg: NewChannelMessage): Promise<ChannelMessageRecord> {
    return channels.publishMessage(this.executor, msg);
  }
  subscribe(instanceId: string, channel: string, mode: ChannelMode, opts?: SubscribeOptions): Promise<void> {
    return channels.subscribe(this.executor, instanceId, channel, mode, opts);
  }
  unsubscribe(instanceId: string, channel: string): Promise<void> {
    return channels.unsubscribe(this.executor, instanceId, channel);
  }
  getSubscription(instanceId: string, channel: string): Promise<SubscriptionRecord | null> {
    return channels.getSubscription(this.executor, instanceId, channel);
  }
  takeNextMessage(instanceId: string, channel: string, match?: MatchDocument | null): Promise<ChannelMessageRecord | null> {
    return channels.takeNextMessage(this.executor, instanceId, channel, match);
  }
  setWaiting(instanceId: string, channel: string, activityId: string, timeout: Date | number | null, match?: MatchDocument | null): Promise<void> {
    return delivery.setWaiting(this.executor, instanceId, channel, activityId, timeout, match);
  }
  lockWaitingSubscription(instanceId: string, channel: string, activityId: string): Promise<boolean> {
    return delivery.lockWaitingSubscription(this.executor, instanceId, channel, activityId);
  }
  clearWaiting(instanceId: string, channel: string): Promise<void> {
    return delivery.clearWaiting(this.executor, instanceId, channel);
  }
  deliverBroadcast(channel: string, limit: number, record: (msg: ChannelMessageRecord) => { eventType: string; data: Payload }): Promise<DeliveredWait[]> {
    return delivery.deliverBroadcast(this.executor, channel, limit, record);
  }
  findWaitingSubscribersWithMessages(limit: number, channel?: string): Promise<WaitingSubscriber[]> {
    return delivery.findWaitingSubscribersWithMessages(this.executor, limit, channel);
  }
  expireMessageWaits(limit: number, onlyInstanceId?: string): Promise<string[]> {
    return delivery.expireMessageWaits(this.executor, limit, onlyInstanceId);
  }
  cleanupChannelMessages(olderThanSeconds: number, limit: number): Promise<number> {
    return channels.cleanupChannelMessages(this.executor, olderThanSeconds, limit);
  }
  joinGroup(instanceId: string, group: string): Promise<void> {
    return groups.joinGroup(this.executor, instanceId, group);
  }
  leaveGroup(instanceId: string, group: string): Promise<void> {
    return groups.leaveGroup(this.executor, instanceId, group);
  }
  groupMembers(group: string): Promise<string[]> {
    return groups.groupMembers(this.executor, group);
  }

  // --- inspection (read-only) -----------------------------------------------
  countInstancesByStatus(filter: InstanceFilter): Promise<Record<InstanceStatus, number>> {
    return inspect.countInstancesByStatus(this.executor, filter);
  }
  listSubscriptions(instanceId: string): Promise<SubscriptionRecord[]> {
    return inspect.listSubscriptions(this.executor, instanceId);
  }
  listTimers(instanceId: string): Promise<TimerRecord[]> {
    return inspect.listTimers(this.executor, instanceId);
  }
  listGroups(instanceId: string): Promise<GroupMembership[]> {
    return inspect.listGroups(this.executor, instanceId);
  }
  listArchivedRuns(instanceId: string): Promise<ArchivedRunSummary[]> {
    return inspect.listArchivedRuns(this.executor, instanceId);
  }
  channelOverview(limit: number): Promise<ChannelSummary[]> {
    return inspect.channelOverview(this.executor, limit);
  }
  channelSubscribers(channel: string, limit: number): Promise<ChannelSubscriber[]> {
    return inspect.channelSubscribers(this.executor, channel, limit);
  }
  pendingMessages(channel: string, limit: number): Promise<ChannelMessageRecord[]> {
    return inspect.pendingMessages(this.executor, channel, limit);
  }

  // --- poison isolation, retention, history pages ----------------------------
  recordInstanceFailure(instanceId: string, failure: InstanceFailure): Promise<{ status: InstanceStatus; failureCount: number } | null> {
    return failures.recordInstanceFailure(this.executor, instanceId, failure);
  }
  resumeQuarantined(instanceId: string): Promise<{ ok: boolean; status: InstanceStatus } | null> {
    return failures.resumeQuarantined(this.executor, instanceId);
  }
  findDueInstances(kind: "timers" | "message_timeouts", limit: number): Promise<string[]> {
    return failures.findDueInstances(this.executor, kind, limit);
  }
  purgeFinishedInstances(olderThanSeconds: number, limit: number, opts?: { onlyInstanceId?: string; maxFailures?: number }): Promise<string[]> {
    return failures.purgeFinishedInstances(this.executor, olderThanSeconds, limit, opts);
  }
  findPurgeableInstances(olderThanSeconds: number, limit: number, maxFailures?: number): Promise<string[]> {
    return failures.findPurgeableInstances(this.executor, olderThanSeconds, limit, maxFailures);
  }
  purgeCloudEventDedupe(olderThanSeconds: number, limit: number): Promise<number> {
    return failures.purgeCloudEventDedupe(this.executor, olderThanSeconds, limit);
  }
  loadHistoryPage(instanceId: string, afterId: number, limit: number): Promise<HistoryPage> {
    return history.loadHistoryPage(this.executor, instanceId, afterId, limit);
  }
  loadHistoryPreview(instanceId: string, opts: { afterId: number; limit: number; maxChars: number; run?: number }): Promise<HistoryPreviewPage> {
    return history.loadHistoryPreview(this.executor, instanceId, opts);
  }

  // --- outbox, dedupe, system locks -----------------------------------------
  addOutboxEvent(event: NewOutboxEvent): Promise<void> {
    return outbox.addOutboxEvent(this.executor, event);
  }
  claimOutboxEvents(limit: number, eventIds?: string[]): Promise<OutboxRecord[]> {
    return outbox.claimOutboxEvents(this.executor, limit, eventIds);
  }
  markOutboxPublished(eventId: string): Promise<void> {
    return outbox.markOutboxPublished(this.executor, eventId);
  }
  markOutboxInvalid(eventId: string, error: string): Promise<void> {
    return outbox.markOutboxInvalid(this.executor, eventId, error);
  }
  markOutboxFailed(eventId: string, error: string, retryInSeconds: number): Promise<void> {
    return outbox.markOutboxFailed(this.executor, eventId, error, retryInSeconds);
  }
  releaseOutboxClaim(eventId: string): Promise<void> {
    return outbox.releaseOutboxClaim(this.executor, eventId);
  }
  expireOutboxEvents(olderThanSeconds: number, maxRetries: number): Promise<number> {
    return outbox.expireOutboxEvents(this.executor, olderThanSeconds, maxRetries);
  }
  listDeadLetters(query: DeadLetterQuery): Promise<DeadLetterPage> {
    return outbox.listDeadLetters(this.executor, query);
  }
  rearmOutboxEvent(eventId: string): Promise<DeadLetterAction> {
    return outbox.rearmOutboxEvent(this.executor, eventId);
  }
  discardOutboxEvent(eventId: string): Promise<DeadLetterAction> {
    return outbox.discardOutboxEvent(this.executor, eventId);
  }
  recordCloudEvent(source: string, id: string): Promise<boolean> {
    return outbox.recordCloudEvent(this.executor, source, id);
  }
  tryAcquireSystemLock(name: string, holder: string, leaseSeconds: number): Promise<boolean> {
    return locks.tryAcquireSystemLock(this.executor, name, holder, leaseSeconds);
  }
  renewSystemLock(name: string, holder: string, leaseSeconds: number): Promise<boolean> {
    return locks.renewSystemLock(this.executor, name, holder, leaseSeconds);
  }
  releaseSystemLock(name: string, holder: string): Promise<void> {
    return locks.releaseSystemLock(this.executor, name, holder);
  }
}

/** The Storage handed to a `transaction()` callback. */
class PgTxStorage extends PgStorage implements TxStorage {
  constructor(executor: Executor, private readonly commitScope: CommitScope) {
    super(executor, commitScope);
  }

  afterCommit(cb: AfterCommit): void {
    if (this.commitScope.detached) {
      throw new Error("afterCommit: this Storage runs inside a transaction it did not start, so it cannot see the commit");
    }
    if (!this.commitScope.open) throw new Error("afterCommit: the transaction has already ended");
    this.commitScope.callbacks.push(cb);
  }
}

export function createStorage(database: Database): Storage {
  const storage = new PgStorage(database.db);
  if (database.listen) storage.listen = database.listen.bind(database);
  return storage;
}
