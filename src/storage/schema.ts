/**
 * The Edda data model as a drizzle `pg-core` schema.
 *
 * Table and column names follow the reference Edda storage layer so the two map
 * 1:1. Additions for serverless correctness:
 *  - `workflow_instances.lock_token`: a fencing token, new on every lease
 *    acquisition; every write that concludes a step is guarded by it.
 *  - `workflow_instances.run`: the recur generation; archive rows carry it.
 *  - `cloudevent_dedupe`: one row per accepted CloudEvent `(source, id)`.
 *  - error / cancellation details on the instance row.
 *  - `workflow_compensations` is unique per `(instance_id, activity_id)` so a
 *    registration replayed after a crash is recorded once.
 *
 * Payload columns are text (exact JSON as written) or bytea (binary), selected
 * by `data_type`, as in the reference.
 */
import { sql } from "drizzle-orm";
import {
  bigserial,
  boolean,
  check,
  customType,
  foreignKey,
  index,
  integer,
  bigint,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uniqueIndex,
  varchar,
} from "drizzle-orm/pg-core";
import { INSTANCE_STATUSES } from "../core/model.ts";

/** bytea as a Uint8Array on every driver. */
export const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => "bytea",
});

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

export { INSTANCE_STATUSES };

/** Constant names of the model as a SQL list of literals (never user input: the lists are the model's). */
const sqlLiterals = (values: readonly string[]) => sql.raw(values.map((v) => `'${v}'`).join(", "));

export const schemaVersion = pgTable("schema_version", {
  version: integer("version").primaryKey(),
  appliedAt: tz("applied_at").notNull().defaultNow(),
  description: text("description").notNull(),
});

export const workflowDefinitions = pgTable(
  "workflow_definitions",
  {
    workflowName: varchar("workflow_name", { length: 255 }).notNull(),
    sourceHash: varchar("source_hash", { length: 64 }).notNull(),
    sourceCode: text("source_code").notNull(),
    createdAt: tz("created_at").notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.workflowName, t.sourceHash] }),
    index("idx_definitions_name").on(t.workflowName),
    index("idx_definitions_hash").on(t.sourceHash),
  ],
);

export const workflowInstances = pgTable(
  "workflow_instances",
  {
    instanceId: varchar("instance_id", { length: 255 }).primaryKey(),
    workflowName: varchar("workflow_name", { length: 255 }).notNull(),
    sourceHash: varchar("source_hash", { length: 64 }).notNull(),
    ownerService: varchar("owner_service", { length: 255 }).notNull(),
    status: varchar("status", { length: 50 }).notNull().default("running"),
    currentActivityId: varchar("current_activity_id", { length: 255 }),
    continuedFrom: varchar("continued_from", { length: 255 }),
    run: integer("run").notNull().default(1),
    startedAt: tz("started_at").notNull().defaultNow(),
    updatedAt: tz("updated_at").notNull().defaultNow(),
    inputData: text("input_data").notNull(),
    outputData: text("output_data"),
    errorData: text("error_data"),
    cancelData: text("cancel_data"),
    lockedBy: varchar("locked_by", { length: 255 }),
    lockedAt: tz("locked_at"),
    lockToken: bigint("lock_token", { mode: "number" }).notNull().default(0),
    lockTimeoutSeconds: integer("lock_timeout_seconds"),
    lockExpiresAt: tz("lock_expires_at"),
    /** W3C traceparent of the span that started the instance: every step of every run joins that trace. */
    traceContext: varchar("trace_context", { length: 512 }),
    /** The instance that started this one as a child (`invoke`, `startChild`). */
    parentInstanceId: varchar("parent_instance_id", { length: 255 }),
    /** The parent's operation waiting for this child's outcome (`invoke`); null for `startChild`. */
    parentActivityId: varchar("parent_activity_id", { length: 255 }),
    /** A detached child survives its parent's cancellation. */
    detached: boolean("detached").notNull().default(false),
    /** Workflow `timeoutSeconds`: past this instant the run fails with WorkflowTimeoutError. */
    deadlineAt: tz("deadline_at"),
    /** Source hash of the code a `parked` instance diverged from (it resumes once other code is deployed). */
    parkedHash: varchar("parked_hash", { length: 64 }),
    /**
     * Consecutive failures of work on this instance that was not a step's
     * ordinary outcome (a step that threw, a timer or delivery that could not
     * be recorded); reset by every concluded step. At the limit the instance
     * is `quarantined`.
     */
    failureCount: integer("failure_count").notNull().default(0),
    /** JSON `{ task, error_type, message, at, attempts, previous_status? }` of the latest such failure. */
    failureData: text("failure_data"),
    /** `concurrency: { key }` — `{workflow}:{key}`: at most `limit` unfinished, unqueued instances per key. */
    concurrencyKey: varchar("concurrency_key", { length: 255 }),
    /** `rateLimit: { key }` — `{workflow}:{key}`: at most `limit` admissions per key in any `periodSeconds` window. */
    rateKey: varchar("rate_key", { length: 255 }),
    /** When a rate-limited instance left the queue (its start as the rate window counts it); null while queued. */
    admittedAt: tz("admitted_at"),
    /** `singleton: { key }` — `{workflow}:{key}`: a start while one is unfinished returns that one. */
    singletonKey: varchar("singleton_key", { length: 255 }),
    /** `debounce: { key }` — `{workflow}:{key}`: starts while one is pending collapse into it. */
    debounceKey: varchar("debounce_key", { length: 255 }),
    /** A pending debounced instance starts no earlier than this (pushed back by each collapsed start). */
    notBefore: tz("not_before"),
    /** A rerun or fork: the instance this one was made from (repairs.ts). */
    originInstanceId: varchar("origin_instance_id", { length: 255 }),
    /** `rerun` or `fork`. */
    originKind: varchar("origin_kind", { length: 10 }),
    /** A fork: the activity of the origin's history it resumed at (the history before it was copied). */
    originActivityId: varchar("origin_activity_id", { length: 255 }),
    /** `start(…, { priority })`: a flow-control key's queue admits higher priorities first, then the oldest. */
    priority: integer("priority").notNull().default(0),
    /** The deployment that started it (`EDDA_DEPLOYMENT`, else the platform's version id, else the code's hash); null before it was recorded. */
    deployment: varchar("deployment", { length: 255 }),
    /**
     * A newer deployment whose code does not replay this instance's history (engine/versioning.ts): it
     * checked once and left the instance on its deployment; null when none refused it.
     */
    replayRefusedBy: varchar("replay_refused_by", { length: 255 }),
    /** That check's mismatch (cut to 500 characters), for `why`. */
    replayRefusedError: text("replay_refused_error"),
  },
  (t) => [
    foreignKey({ columns: [t.workflowName, t.sourceHash], foreignColumns: [workflowDefinitions.workflowName, workflowDefinitions.sourceHash] }).onDelete("restrict"),
    // The model's list (a wait kind declared in core/model.ts brings its status): a new status is a migration away.
    check("valid_status", sql`${t.status} IN (${sqlLiterals(INSTANCE_STATUSES)})`),
    // Every step rewrites its instance row. The step that hands its lease on keeps the status and
    // changes only columns no index covers (lock_expires_at, locked_at, lock_token, current_activity_id,
    // failure_*; updated_at stays), so Postgres can update it HOT: no index entry written, and the
    // fillfactor (migration 0009) leaves room on the page for the new version. Hence no index here
    // may name lock_expires_at or the other per-step columns, and each index serves a query:
    // the workflow's instances (flow control, unpark, the list filter) and the definition foreign key
    index("idx_instances_definition").on(t.workflowName, t.sourceHash),
    // GET /deployments: each deployment's instances by status
    index("idx_instances_deployment").on(t.deployment, t.status),
    // the instance list (newest first) and the flow-control queues (oldest first)
    index("idx_instances_started").on(t.startedAt),
    // expired leases: the held ones are few (one per step in flight), sorted by expiry in memory
    index("idx_instances_leased").on(t.lockedBy).where(sql`${t.lockedBy} IS NOT NULL`),
    // purging finished instances and resuming idle ones, oldest first
    index("idx_instances_updated").on(t.updatedAt),
    // find runnable work: the running status with no lock held; also every status filter
    index("idx_instances_resumable").on(t.status, t.lockedBy),
    // slot counts and the queue of a concurrency key (oldest first)
    index("idx_instances_concurrency").on(t.concurrencyKey, t.status, t.startedAt).where(sql`${t.concurrencyKey} IS NOT NULL`),
    // admissions in a rate window; a key's queue is its rows with admitted_at NULL
    index("idx_instances_rate").on(t.rateKey, t.admittedAt).where(sql`${t.rateKey} IS NOT NULL`),
    index("idx_instances_singleton").on(t.singletonKey, t.status).where(sql`${t.singletonKey} IS NOT NULL`),
    // the pending instance of a debounce key, and which are due
    index("idx_instances_debounce").on(t.debounceKey, t.notBefore).where(sql`${t.debounceKey} IS NOT NULL AND ${t.status} = 'queued'`),
    index("idx_instances_parent").on(t.parentInstanceId).where(sql`${t.parentInstanceId} IS NOT NULL`),
    index("idx_instances_deadline").on(t.deadlineAt).where(sql`${t.deadlineAt} IS NOT NULL`),
  ],
);

const instanceFk = (col: any) =>
  foreignKey({ columns: [col], foreignColumns: [workflowInstances.instanceId] }).onDelete("cascade");

export const workflowHistory = pgTable(
  "workflow_history",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    activityId: varchar("activity_id", { length: 255 }).notNull(),
    eventType: varchar("event_type", { length: 100 }).notNull(),
    dataType: varchar("data_type", { length: 10 }).notNull(),
    eventData: text("event_data"),
    eventDataBinary: bytea("event_data_binary"),
    createdAt: tz("created_at").notNull().defaultNow(),
  },
  (t) => [
    instanceFk(t.instanceId),
    check("history_valid_data_type", sql`${t.dataType} IN ('json', 'binary')`),
    check(
      "history_data_type_consistency",
      sql`(${t.dataType} = 'json' AND ${t.eventData} IS NOT NULL AND ${t.eventDataBinary} IS NULL) OR (${t.dataType} = 'binary' AND ${t.eventData} IS NULL AND ${t.eventDataBinary} IS NOT NULL)`,
    ),
    unique("unique_instance_activity").on(t.instanceId, t.activityId),
    index("idx_history_instance").on(t.instanceId, t.id),
  ],
);

export const workflowHistoryArchive = pgTable(
  "workflow_history_archive",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    run: integer("run").notNull(),
    activityId: varchar("activity_id", { length: 255 }).notNull(),
    eventType: varchar("event_type", { length: 100 }).notNull(),
    dataType: varchar("data_type", { length: 10 }).notNull(),
    eventData: text("event_data"),
    eventDataBinary: bytea("event_data_binary"),
    createdAt: tz("created_at").notNull(),
    archivedAt: tz("archived_at").notNull().defaultNow(),
  },
  (t) => [
    instanceFk(t.instanceId),
    index("idx_history_archive_instance").on(t.instanceId, t.run),
    index("idx_history_archive_archived").on(t.archivedAt),
  ],
);

/**
 * Values stored out of line (storage/payload-refs.ts): a payload over the
 * threshold, referenced from its history record, input or output by
 * `{"$ref": "<ref>:<bytes>:<sha-256>"}`. Owned by one instance and deleted
 * with it (retention, deletion); a fork copies its source's rows.
 */
export const workflowPayloads = pgTable(
  "workflow_payloads",
  {
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    ref: varchar("ref", { length: 64 }).notNull(),
    size: integer("size").notNull(),
    data: text("data").notNull(),
    createdAt: tz("created_at").notNull().defaultNow(),
  },
  (t) => [instanceFk(t.instanceId), primaryKey({ columns: [t.instanceId, t.ref] })],
);

export const workflowCompensations = pgTable(
  "workflow_compensations",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    activityId: varchar("activity_id", { length: 255 }).notNull(),
    activityName: varchar("activity_name", { length: 255 }).notNull(),
    args: text("args").notNull(),
    createdAt: tz("created_at").notNull().defaultNow(),
  },
  (t) => [
    instanceFk(t.instanceId),
    unique("unique_instance_compensation").on(t.instanceId, t.activityId),
    index("idx_compensations_instance").on(t.instanceId, t.createdAt),
  ],
);

export const workflowTimerSubscriptions = pgTable(
  "workflow_timer_subscriptions",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    timerId: varchar("timer_id", { length: 255 }).notNull(),
    expiresAt: tz("expires_at").notNull(),
    activityId: varchar("activity_id", { length: 255 }),
    createdAt: tz("created_at").notNull().defaultNow(),
  },
  (t) => [
    instanceFk(t.instanceId),
    unique("unique_instance_timer").on(t.instanceId, t.timerId),
    index("idx_timer_subscriptions_expires").on(t.expiresAt),
    index("idx_timer_subscriptions_instance").on(t.instanceId),
  ],
);

export const outboxEvents = pgTable(
  "outbox_events",
  {
    eventId: varchar("event_id", { length: 255 }).primaryKey(),
    eventType: varchar("event_type", { length: 255 }).notNull(),
    eventSource: varchar("event_source", { length: 255 }).notNull(),
    dataType: varchar("data_type", { length: 10 }).notNull(),
    eventData: text("event_data"),
    eventDataBinary: bytea("event_data_binary"),
    contentType: varchar("content_type", { length: 100 }).notNull().default("application/json"),
    extensions: text("extensions"),
    createdAt: tz("created_at").notNull().defaultNow(),
    publishedAt: tz("published_at"),
    status: varchar("status", { length: 50 }).notNull().default("pending"),
    retryCount: integer("retry_count").notNull().default(0),
    nextAttemptAt: tz("next_attempt_at").notNull().defaultNow(),
    lastError: text("last_error"),
    /** When an operator re-armed the dead-lettered row: its age (maxAgeSeconds) counts from here. */
    rearmedAt: tz("rearmed_at"),
  },
  (t) => [
    check("outbox_valid_status", sql`${t.status} IN ('pending', 'processing', 'published', 'failed', 'invalid', 'expired')`),
    check("outbox_valid_data_type", sql`${t.dataType} IN ('json', 'binary')`),
    check(
      "outbox_data_type_consistency",
      sql`(${t.dataType} = 'json' AND ${t.eventData} IS NOT NULL AND ${t.eventDataBinary} IS NULL) OR (${t.dataType} = 'binary' AND ${t.eventData} IS NULL AND ${t.eventDataBinary} IS NOT NULL)`,
    ),
    index("idx_outbox_status").on(t.status, t.nextAttemptAt),
    index("idx_outbox_created").on(t.createdAt),
  ],
);

export const workflowGroupMemberships = pgTable(
  "workflow_group_memberships",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    groupName: varchar("group_name", { length: 255 }).notNull(),
    joinedAt: tz("joined_at").notNull().defaultNow(),
  },
  (t) => [
    instanceFk(t.instanceId),
    unique("unique_instance_group").on(t.instanceId, t.groupName),
    index("idx_group_memberships_group").on(t.groupName),
    index("idx_group_memberships_instance").on(t.instanceId),
  ],
);

/** Tags (search attributes, core/tags.ts): one row per key of an instance; found by (key, value). */
export const workflowInstanceTags = pgTable(
  "workflow_instance_tags",
  {
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    key: varchar("key", { length: 64 }).notNull(),
    value: varchar("value", { length: 256 }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.instanceId, t.key] }), instanceFk(t.instanceId), index("idx_instance_tags_key_value").on(t.key, t.value, t.instanceId)],
);

export const channelMessages = pgTable(
  "channel_messages",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    channel: varchar("channel", { length: 255 }).notNull(),
    messageId: varchar("message_id", { length: 255 }).notNull().unique(),
    dataType: varchar("data_type", { length: 10 }).notNull(),
    data: text("data"),
    dataBinary: bytea("data_binary"),
    metadata: text("metadata"),
    // point-to-point: only this instance may see the message
    targetInstanceId: varchar("target_instance_id", { length: 255 }),
    publishedAt: tz("published_at").notNull().defaultNow(),
  },
  (t) => [
    check("channel_valid_data_type", sql`${t.dataType} IN ('json', 'binary')`),
    check(
      "channel_data_type_consistency",
      sql`(${t.dataType} = 'json' AND ${t.data} IS NOT NULL AND ${t.dataBinary} IS NULL) OR (${t.dataType} = 'binary' AND ${t.data} IS NULL AND ${t.dataBinary} IS NOT NULL)`,
    ),
    index("idx_channel_messages_channel").on(t.channel, t.publishedAt),
    index("idx_channel_messages_channel_id").on(t.channel, t.id),
    index("idx_channel_messages_target").on(t.targetInstanceId),
  ],
);

export const channelSubscriptions = pgTable(
  "channel_subscriptions",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    channel: varchar("channel", { length: 255 }).notNull(),
    mode: varchar("mode", { length: 20 }).notNull(),
    // set while the instance waits for a message on this channel
    activityId: varchar("activity_id", { length: 255 }),
    cursorMessageId: bigint("cursor_message_id", { mode: "number" }),
    timeoutAt: tz("timeout_at"),
    subscribedAt: tz("subscribed_at").notNull().defaultNow(),
    /** The event match of the wait in progress (core/match.ts), null when it takes any message. */
    match: jsonb("match"),
    /** Event lookback: only messages published after this (the instance's start) count. */
    lookbackFrom: tz("lookback_from"),
  },
  (t) => [
    instanceFk(t.instanceId),
    check("channel_valid_mode", sql`${t.mode} IN ('broadcast', 'competing', 'direct')`),
    unique("unique_channel_instance_channel").on(t.instanceId, t.channel),
    index("idx_channel_subscriptions_channel").on(t.channel),
    index("idx_channel_subscriptions_instance").on(t.instanceId),
    index("idx_channel_subscriptions_waiting").on(t.channel, t.activityId),
    index("idx_channel_subscriptions_timeout").on(t.timeoutAt),
  ],
);

export const channelDeliveryCursors = pgTable(
  "channel_delivery_cursors",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    channel: varchar("channel", { length: 255 }).notNull(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    lastDeliveredId: bigint("last_delivered_id", { mode: "number" }).notNull(),
    updatedAt: tz("updated_at").notNull().defaultNow(),
  },
  (t) => [
    instanceFk(t.instanceId),
    unique("unique_channel_delivery_cursor").on(t.channel, t.instanceId),
    index("idx_channel_delivery_cursors_channel").on(t.channel),
  ],
);

export const channelMessageClaims = pgTable(
  "channel_message_claims",
  {
    messageId: varchar("message_id", { length: 255 }).primaryKey(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    claimedAt: tz("claimed_at").notNull().defaultNow(),
  },
  (t) => [
    foreignKey({ columns: [t.messageId], foreignColumns: [channelMessages.messageId] }).onDelete("cascade"),
    instanceFk(t.instanceId),
    index("idx_channel_message_claims_instance").on(t.instanceId),
  ],
);

/**
 * An event a matching wait received: the instance's broadcast cursor stays
 * where it was (events of other matches before it must stay visible), so the
 * receipt is what keeps the event from being received twice by the instance.
 */
export const channelMessageReceipts = pgTable(
  "channel_message_receipts",
  {
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    messageId: varchar("message_id", { length: 255 }).notNull(),
    receivedAt: tz("received_at").notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.instanceId, t.messageId] }),
    instanceFk(t.instanceId),
    foreignKey({ columns: [t.messageId], foreignColumns: [channelMessages.messageId] }).onDelete("cascade"),
    index("idx_channel_message_receipts_message").on(t.messageId),
  ],
);

/**
 * One row per scheduled workflow (`workflow(name, { schedule })`): when it is
 * due next and what it last started. A sweep claims a due row FOR UPDATE SKIP
 * LOCKED, starts the tick's instance and moves `next_run_at` on in the same
 * transaction.
 */
export const workflowSchedules = pgTable(
  "workflow_schedules",
  {
    workflowName: varchar("workflow_name", { length: 255 }).primaryKey(),
    cron: varchar("cron", { length: 255 }).notNull(),
    timezone: varchar("timezone", { length: 64 }).notNull(),
    missed: varchar("missed", { length: 10 }).notNull(),
    /** Null: the pattern never fires again. */
    nextRunAt: tz("next_run_at"),
    lastRunAt: tz("last_run_at"),
    lastInstanceId: varchar("last_instance_id", { length: 255 }),
    updatedAt: tz("updated_at").notNull().defaultNow(),
    /** Set while an operator has paused the schedule: no sweep claims the row (resume moves next_run_at past now). */
    pausedAt: tz("paused_at"),
  },
  (t) => [index("idx_workflow_schedules_next").on(t.nextRunAt)],
);

/**
 * A bulk action over the instances a filter matched (`POST /instances/bulk`,
 * engine/bulk.ts). Worked through in batches in instance-id order: each batch
 * locks this row (FOR UPDATE SKIP LOCKED, so racing workers skip it), acts on
 * the next instances after `cursor`, and moves `cursor` and the counters in
 * the same transaction — a worker killed mid-batch rolls the whole batch back,
 * and the next worker does it again, exactly once.
 */
export const bulkOperations = pgTable(
  "bulk_operations",
  {
    operationId: varchar("operation_id", { length: 255 }).primaryKey(),
    action: varchar("action", { length: 16 }).notNull(),
    /** JSON of the list filter (workflow, statuses, time range, text). */
    filter: text("filter").notNull(),
    status: varchar("status", { length: 16 }).notNull().default("running"),
    /** Matching instances counted when the operation was created. */
    total: integer("total").notNull(),
    done: integer("done").notNull().default(0),
    /** Matched but no longer in a status the action applies to when its batch reached it. */
    skipped: integer("skipped").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    /** The last instance id handled (ascending); null before the first batch. */
    cursor: varchar("cursor", { length: 255 }),
    /** Instances started after this instant are not matched (the operation's own reruns among them). */
    snapshotAt: tz("snapshot_at").notNull(),
    /** JSON array of the latest failures `{ instanceId, error }` (at most 20). */
    errors: text("errors").notNull().default("[]"),
    createdAt: tz("created_at").notNull().defaultNow(),
    updatedAt: tz("updated_at").notNull().defaultNow(),
  },
  (t) => [check("bulk_valid_status", sql`${t.status} IN ('running', 'completed')`), index("idx_bulk_operations_status").on(t.status)],
);

export const systemLocks = pgTable(
  "system_locks",
  {
    lockName: varchar("lock_name", { length: 255 }).primaryKey(),
    lockedBy: varchar("locked_by", { length: 255 }),
    lockedAt: tz("locked_at"),
    lockExpiresAt: tz("lock_expires_at"),
  },
  (t) => [index("idx_system_locks_expires").on(t.lockExpiresAt)],
);

/**
 * The deployments engines run (engine/versioning.ts): each one's first sighting orders them (an `auto`
 * workflow's instance moves only to a newer deployment), and `last_seen_at`, renewed by each sweep of
 * that deployment, tells whether any engine still serves it (`why` = `pinned`).
 */
export const deployments = pgTable("deployments", {
  deployment: varchar("deployment", { length: 255 }).primaryKey(),
  firstSeenAt: tz("first_seen_at").notNull(),
  lastSeenAt: tz("last_seen_at").notNull(),
});

/** One row per accepted CloudEvent: a duplicate `(source, id)` is accepted once. */
export const cloudeventDedupe = pgTable(
  "cloudevent_dedupe",
  {
    source: varchar("source", { length: 1024 }).notNull(),
    eventId: varchar("event_id", { length: 255 }).notNull(),
    receivedAt: tz("received_at").notNull().defaultNow(),
    /** What the viewer's received-events page shows (null on rows stored before they were recorded). */
    eventType: varchar("event_type", { length: 255 }),
    /** The event's own `time` attribute, as sent. */
    eventTime: varchar("event_time", { length: 64 }),
    /** The channel message it became: whoever claimed or received it is who it woke. */
    messageId: varchar("message_id", { length: 255 }),
    /** The instance an event-handler workflow started for it. */
    startedInstanceId: varchar("started_instance_id", { length: 255 }),
  },
  (t) => [primaryKey({ columns: [t.source, t.eventId] }), index("idx_cloudevent_dedupe_received").on(t.receivedAt)],
);

/**
 * Viewer sessions ended by logging out, until the session would have expired
 * anyway: a copied cookie of a revoked session is refused. The sweep deletes
 * rows once `expires_at` has passed (the cookie's own expiry refuses it then).
 */
export const viewerSessionRevocations = pgTable(
  "viewer_session_revocations",
  {
    sessionId: varchar("session_id", { length: 64 }).primaryKey(),
    expiresAt: tz("expires_at").notNull(),
  },
  (t) => [index("idx_viewer_session_revocations_expires").on(t.expiresAt)],
);

/**
 * Realtime streams (storage/streams.ts): one head row per instance that has
 * streamed, and its items in order. The head is the per-instance sequence and
 * the size budget: every append upserts it first, so appends to one stream are
 * serialized by its row lock and `seq` order is commit order (a reader that
 * read up to n never finds a later commit below n). Both go with the instance.
 */
export const workflowStreams = pgTable(
  "workflow_streams",
  {
    instanceId: varchar("instance_id", { length: 255 }).primaryKey(),
    lastSeq: bigint("last_seq", { mode: "number" }).notNull().default(0),
    /** Bytes of chunk data appended so far (the per-instance limit). */
    totalBytes: bigint("total_bytes", { mode: "number" }).notNull().default(0),
  },
  (t) => [instanceFk(t.instanceId)],
);

export const workflowStreamChunks = pgTable(
  "workflow_stream_chunks",
  {
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    seq: bigint("seq", { mode: "number" }).notNull(),
    /** `chunk` (an activity's ctx.stream.write), `emit` (workflow emit), `retry` (a new attempt of a streaming activity). */
    kind: varchar("kind", { length: 16 }).notNull(),
    /** The operation that wrote it: the activity id, or the emit's operation id. */
    source: varchar("source", { length: 255 }).notNull(),
    run: integer("run").notNull().default(1),
    attempt: integer("attempt").notNull().default(1),
    topic: varchar("topic", { length: 255 }),
    dataType: varchar("data_type", { length: 10 }).notNull(),
    data: text("data"),
    dataBinary: bytea("data_binary"),
    createdAt: tz("created_at").notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.instanceId, t.seq] }),
    instanceFk(t.instanceId),
    check("stream_valid_kind", sql`${t.kind} IN ('chunk', 'emit', 'retry')`),
    check(
      "stream_data_type_consistency",
      sql`(${t.dataType} = 'json' AND ${t.data} IS NOT NULL AND ${t.dataBinary} IS NULL) OR (${t.dataType} = 'binary' AND ${t.data} IS NULL AND ${t.dataBinary} IS NOT NULL)`,
    ),
    // An emit is written once: a replay (or a zombie) that appends it again adds nothing.
    uniqueIndex("uq_stream_emit").on(t.instanceId, t.run, t.source).where(sql`${t.kind} = 'emit'`),
    // Whether an activity streamed before (the retry marker of its next attempt).
    index("idx_stream_source").on(t.instanceId, t.source),
  ],
);

/**
 * Per-wait webhook URLs (`createWebhook`): one row per hook, keyed by the
 * SHA-256 of its token (the token itself is never stored). `open` until the
 * first POST (`fired`, the request kept in `payload` until the wait takes it),
 * its expiry (`expired`) or the instance's end (`cancelled`); `run` keeps a
 * recurred run's hooks apart from the previous run's. `wait_id` is the wait
 * that listens on it (set when the wait begins: `{hook id}:wait`, or a race's
 * id); once a record at that id exists and the hook is still open, another
 * branch of its race won and a POST is refused (410 `lost`).
 */
export const workflowWebhooks = pgTable(
  "workflow_webhooks",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    tokenHash: varchar("token_hash", { length: 64 }).notNull(),
    instanceId: varchar("instance_id", { length: 255 }).notNull(),
    run: integer("run").notNull(),
    hookId: varchar("hook_id", { length: 255 }).notNull(),
    status: varchar("status", { length: 20 }).notNull().default("open"),
    expiresAt: tz("expires_at"),
    /** The accepted request as JSON (`WebhookDelivery`), once fired. */
    payload: text("payload"),
    createdAt: tz("created_at").notNull().defaultNow(),
    firedAt: tz("fired_at"),
    waitId: varchar("wait_id", { length: 255 }),
  },
  (t) => [
    instanceFk(t.instanceId),
    check("webhook_valid_status", sql`${t.status} IN ('open', 'fired', 'expired', 'cancelled')`),
    unique("unique_webhook_token").on(t.tokenHash),
    unique("unique_webhook_hook").on(t.instanceId, t.run, t.hookId),
    index("idx_webhooks_expiry").on(t.expiresAt).where(sql`${t.status} = 'open' AND ${t.expiresAt} IS NOT NULL`),
  ],
);
