/**
 * Edda Edge — durable execution for serverless and edge platforms.
 *
 * The public surface, listed name by name so that nothing internal leaks by
 * accident (the API report in etc/ shows every change in review): workflow
 * and activity definitions, the operations workflow code calls, the errors
 * user code may catch or throw, and the app factory with the types its
 * options and results use. Platform adapters and database drivers have their
 * own entries (`edda-edge/platform/*`, `edda-edge/drivers/*`), so a bundle
 * pulls in only the driver it uses.
 */
export { activity, workflow } from "./core/definitions.ts";
export type { Activity, ActivityFn, ActivityOptions, Workflow, WorkflowFn, WorkflowOptions, WorkflowInput, WorkflowOutput, InputOf, StartInputOf } from "./core/definitions.ts";
export type { ActivityContext, ActivityStream, WorkflowContext, Transaction } from "./core/context.ts";
export { emit, MAX_STREAM_ITEM_BYTES } from "./core/stream.ts";
export type { StreamOptions } from "./core/stream.ts";
export { sleep, sleepUntil, registerCompensation } from "./core/primitives.ts";
export type { RetryPolicy } from "./core/retry.ts";
export {
  EddaError,
  TerminalError,
  UnserializableValueError,
  PayloadTooLargeError,
  RetryExhaustedError,
  NonDeterminismError,
  MessageTimeoutError,
  EventTimeoutError,
  ChannelModeConflictError,
  ValidationError,
  NotFoundError,
  ConflictError,
  ChildWorkflowError,
  WorkflowTimeoutError,
  ActivityTimeoutError,
  StreamLimitError,
} from "./core/errors.ts";
export { patched } from "./core/patched.ts";
export { encryptionCodec, EncryptedMatchError, PayloadDecryptionError, type PayloadCodec } from "./core/payload-codec.ts";
export { MAX_VALUE_BYTES } from "./core/serialization.ts";
export type { LargeValueStore, OutOfLine } from "./storage/payload-refs.ts";
export { MAX_INSTANCE_BYTES } from "./storage/payload-refs.ts";
export { invoke, startChild } from "./engine/children.ts";
export type { ChildOptions } from "./engine/children.ts";
export type { ErrorClass } from "./core/serialization.ts";
export { receive, waitMessage, waitEvent } from "./core/waits.ts";
export { race, onTimer, onTimerUntil, onMessage, onEvent, onWebhook } from "./core/race.ts";
export type { RaceBranch, RaceResult } from "./core/race.ts";
export type { ChannelMessage, ReceivedEvent, ReceiveOptions, WaitEventOptions } from "./core/waits.ts";
export type { EventMatch, EventMatchValue, MatchDocument } from "./core/match.ts";
export type { MissedTicks, ScheduleOption, ScheduleSpec } from "./core/schedule.ts";
export type { ConcurrencyOption, DebounceOption, FlowControlOptions, RateLimitOption, SingletonOption } from "./core/flow-control.ts";
export type { ScheduledInput } from "./engine/schedules.ts";
export { subscribe, unsubscribe, publish, sendTo, joinGroup, leaveGroup, publishToGroup } from "./engine/messaging.ts";
export type { PublishOptions, Publisher } from "./engine/messaging.ts";
export { sendEvent, sendEventTransactional } from "./engine/events.ts";
export type { OutgoingEvent } from "./engine/events.ts";
export { webhook, stripeVerifier, githubVerifier, standardWebhooksVerifier, hmacVerifier } from "./core/webhooks.ts";
export type { Webhook, WebhookEvent, WebhookOptions, WebhookRequest, WebhookVerifier, HmacVerifierOptions, ToleranceOptions, HmacAlgorithm, HmacScheme, SignatureEncoding } from "./core/webhooks.ts";
export type { RawDelivery, SignatureCheck } from "./core/webhook-signatures.ts";
export { createWebhook, type CreateWebhookOptions } from "./engine/webhook-waits.ts";
export { setTags } from "./engine/tags.ts";
export { MAX_TAGS, MAX_TAG_KEY, MAX_TAG_VALUE, type Tags } from "./core/tags.ts";
export { WebhookExpiredError, type WaitWebhook, type WebhookDelivery } from "./core/webhook-waits.ts";

export { createEdda } from "./edda.ts";
export type { Edda, EddaOptions, DispatcherOption, ExecutionContextLike, StartResult, InstancePage } from "./edda.ts";
export type { RetentionOptions, StartOptions } from "./engine/engine.ts";
export type { FlowControlView, HistoryEntry, InstanceDetail, InstanceFailureView, InstanceView, StoredError, WaitWebhookView } from "./engine/views.ts";
export type { HistoryBudget, WhyFacts, WhyReason, WhyReasonOf, WhyView } from "./engine/why-view.ts";
export type { RowFailure } from "./engine/poison.ts";
export type { EngineHooks, WorkflowInfo, ActivityInfo } from "./engine/hooks.ts";
export type { Dispatcher, DispatchScope, LocalDispatcherOptions, StepRequest, StepRunner } from "./engine/dispatcher.ts";
export type { SubrequestBudget } from "./engine/budget.ts";
export type { TracingApi, OtelContext, OtelSpan, OtelSpanContext, OtelTracer } from "./engine/tracing.ts";
export type { MetricAttributes, MetricsApi, OtelMeter } from "./engine/metrics.ts";
export type { OutboxOptions, RelayReport } from "./engine/outbox.ts";
export type { GroupCommitOptions } from "./engine/group-commit.ts";
export type { SweepOptions, SweepReport, SweepTask, SweepFailure } from "./engine/sweeper.ts";
export type { ChildSummary, FailureTask, InstanceFilter, InstanceStatus, ListInstancesQuery, WaitWebhookStatus } from "./storage/types.ts";
export { INSTANCE_STATUSES, WHY_KINDS, type WhyKind } from "./core/model.ts";
export type { ChannelMode, ExpiryCounter, ExpiryTask } from "./core/model.ts";
export type { ApiSurface } from "./http/routes.ts";
export type { Database, DatabaseDriver, DriverConnection, DriverName, Db, Executor, QueryStats, Tx } from "./storage/database.ts";
export { migrate } from "./storage/migrate.ts";
export type { MigrationResult } from "./storage/migrate.ts";
