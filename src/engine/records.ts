/**
 * The stored records the engine hands to its callers (the HTTP API, the viewer,
 * MCP), re-exported here so that the layers above the engine name them through
 * the engine and never import `storage/` themselves. Statuses and history
 * events are core's shared model (core/model.ts): import those from there.
 */
export type {
  ArchivedRunSummary,
  BulkAction,
  BulkFilter,
  BulkOperationRecord,
  ChannelMessageRecord,
  ChannelSubscriber,
  ChannelSummary,
  ChildSummary,
  CompensationRecord,
  DeadLetterStatus,
  GroupMembership,
  InstanceFilter,
  InstanceRecord,
  ReceivedEvent,
  ScheduleRecord,
  StreamItem,
  SubscriptionRecord,
  TimerRecord,
  TxStorage,
  WaitWebhookRecord,
} from "../storage/types.ts";
export { DEAD_LETTER_STATUSES } from "../storage/types.ts";
