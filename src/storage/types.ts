/**
 * The Storage contract: everything the engine, the sweeper and the HTTP layer
 * need from Postgres, in Edda's domain words, as the composition of the
 * storage areas. Each area module (instances.ts, leases.ts, history.ts …)
 * owns its interface and its implementation side by side; pg-storage.ts
 * composes them over one executor. One implementation serves all three
 * drivers; the contract test suite runs the same cases against each.
 *
 * Time is always the database's `now()` (never the caller's clock), so leases
 * and timers are consistent across workers with skewed clocks.
 *
 * This module only gathers names (types, and the status lists of the leaf
 * records.ts), so importing it loads no area's code.
 */
import type { Executor } from "./database.ts";
import type { InstancesArea } from "./instances.ts";
import type { LeasesArea } from "./leases.ts";
import type { HistoryArea } from "./history.ts";
import type { LifecycleArea } from "./lifecycle.ts";
import type { ChannelsArea } from "./channels.ts";
import type { ChannelDeliveryArea } from "./channel-delivery.ts";
import type { GroupsArea } from "./groups.ts";
import type { FlowControlArea } from "./flow-control.ts";
import type { SchedulesArea } from "./schedules.ts";
import type { OutboxArea } from "./outbox.ts";
import type { InspectArea } from "./inspect.ts";
import type { FailuresArea } from "./failures.ts";
import type { LocksArea } from "./locks.ts";
import type { SessionsArea } from "./sessions.ts";
import type { GaugesArea } from "./gauges.ts";
import type { StreamsArea } from "./streams.ts";
import type { WebhookWaitsArea } from "./webhook-waits.ts";
import type { ReceivedEventsArea } from "./received-events.ts";
import type { RepairsArea } from "./repairs.ts";
import type { TagsArea } from "./tags.ts";
import type { VersioningArea } from "./versioning.ts";

export * from "./records.ts";
export type { InstanceEnd, InstancePage, ListInstancesQuery, NewInstance } from "./instances.ts";
export type { ConcludeOptions, ConcludeResult, LeasedInstance, LeasedLoad, StepConclusion } from "./leases.ts";
export type { HistoryPage, HistoryPreview, HistoryPreviewPage } from "./history.ts";
export type { ChildSummary } from "./lifecycle.ts";
export type { NewChannelMessage, SubscribeOptions } from "./channels.ts";
export type { DeliveredWait, WaitingSubscriber } from "./channel-delivery.ts";
export type { DueSchedule, ScheduleRecord, ScheduleRegistration } from "./schedules.ts";
export type { DeadLetterAction, DeadLetterPage, DeadLetterQuery } from "./outbox.ts";
export type { ArchivedRunSummary, ChannelSubscriber, ChannelSummary, ChannelWait, DeploymentSummary, FlowKeyPeers, GroupMembership, TimerRecord } from "./inspect.ts";
export type { FailureTask, InstanceFailure } from "./failures.ts";
export type { GaugeSample } from "./gauges.ts";
export type { NewStreamItem, StreamAppend, StreamAppendResult, StreamItem, StreamItemKind, StreamRead } from "./streams.ts";
export type { WaitWebhookRecord, WaitWebhookStatus, WebhookFire, WebhookGoneReason } from "./webhook-waits.ts";
export type { ReceivedEvent } from "./received-events.ts";
export type { InstancesArea, LeasesArea, HistoryArea, LifecycleArea, ChannelsArea, ChannelDeliveryArea, GroupsArea, FlowControlArea, SchedulesArea, OutboxArea, InspectArea, FailuresArea, LocksArea, SessionsArea, GaugesArea, StreamsArea, WebhookWaitsArea, ReceivedEventsArea, RepairsArea, TagsArea, VersioningArea };
export type { DeploymentSighting } from "./versioning.ts";
export type { BulkAction, BulkFilter, BulkOperationRecord, BulkProgress } from "./repairs.ts";

/** What every Storage has besides its areas: its executor, transactions, LISTEN. */
export interface StorageCore {
  /** The executor this storage runs on (database, or the transaction it is bound to). */
  readonly executor: Executor;
  /**
   * Run `fn` in a transaction (a savepoint when already inside one) with a
   * Storage bound to it. Callbacks registered with `afterCommit` run in order
   * after the top-level COMMIT only; one failing does not stop the others;
   * they are discarded if the transaction or their savepoint rolls back.
   */
  transaction<T>(fn: (tx: TxStorage) => Promise<T>): Promise<T>;
  /** LISTEN on the database, where the driver supports it (see Database.listen). */
  listen?(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  /** False when the database runs one statement at a time (PGlite): a write outside an open transaction waits for it. */
  readonly concurrent?: boolean;
}

export type Storage = StorageCore &
  InstancesArea &
  LeasesArea &
  HistoryArea &
  LifecycleArea &
  ChannelsArea &
  ChannelDeliveryArea &
  GroupsArea &
  FlowControlArea &
  SchedulesArea &
  OutboxArea &
  InspectArea &
  GaugesArea &
  ReceivedEventsArea &
  TagsArea &
  FailuresArea &
  LocksArea &
  SessionsArea &
  StreamsArea &
  WebhookWaitsArea &
  RepairsArea &
  VersioningArea;

export interface TxStorage extends Storage {
  afterCommit(cb: () => void | Promise<void>): void;
}
