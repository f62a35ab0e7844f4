/**
 * The shared model: what the replay core and the storage layer both speak
 * about — instance statuses, history event types, payloads and history rows.
 * A leaf module (it imports nothing), so storage depends on this file and not
 * on the rest of `core`, and each name is defined exactly once.
 */

export const INSTANCE_STATUSES = [
  "running",
  "waiting_for_timer",
  "waiting_for_message",
  /** Waiting for a child workflow's outcome (`invoke`). */
  "waiting_for_child",
  /** Waiting for a POST to a per-wait URL (`createWebhook` … `hook.wait()`), or its expiry. */
  "waiting_for_webhook",
  "compensating",
  "completed",
  "failed",
  "cancelled",
  /**
   * Replay diverged from the recorded history (NonDeterminismError, usually
   * after a deploy): nothing runs until code with a different source hash is
   * deployed; then the sweeper resumes it. Cancellable.
   */
  "parked",
  /**
   * Set aside: its steps (or a sweep task's work on it) kept failing, so it no
   * longer runs; the failure is on the instance. An operator resumes or cancels it.
   */
  "quarantined",
  /**
   * Created, not started (flow control): waiting for a concurrency slot
   * or a rate window (promoted to `running` in start order), or a pending
   * debounced instance (starts once its key was quiet). Cancellable.
   */
  "queued",
] as const;

export type InstanceStatus = (typeof INSTANCE_STATUSES)[number];

/** Statuses a step may run in. */
export const RUNNABLE_STATUSES: readonly InstanceStatus[] = ["running", "compensating"];
/** Statuses from which cancellation is allowed. */
export const CANCELLABLE_STATUSES: readonly InstanceStatus[] = ["running", "waiting_for_timer", "waiting_for_message", "waiting_for_child", "waiting_for_webhook", "parked", "quarantined", "queued"];
export const TERMINAL_STATUSES: readonly InstanceStatus[] = ["completed", "failed", "cancelled"];

/**
 * The activity id prefix of a saga compensation's records: `compensate:{registered activity id}`, its failed
 * attempts `…#n` and retry timers `…#retryn`. Such a record in history means the body is over (engine/decide.ts `phase`).
 */
export const COMPENSATION_PREFIX = "compensate:";

/** History event types (`workflow_history.event_type`). */
export const EV = {
  ActivityCompleted: "ActivityCompleted",
  ActivityFailed: "ActivityFailed",
  /** A failed attempt that will be retried, at `{id}#{attempt}`. */
  ActivityAttemptFailed: "ActivityAttemptFailed",
  TimerExpired: "TimerExpired",
  MessageReceived: "MessageReceived",
  MessageTimeout: "MessageTimeout",
  /** A deterministic value (`ctx.now()`, `ctx.random()`, `ctx.uuid()`) recorded once. */
  ValueRecorded: "ValueRecorded",
  /** An `emit(ctx, data)` of the workflow: `{ topic, data }`, appended to the stream once. */
  StreamEmitted: "StreamEmitted",
  /** A child workflow's outcome at the parent's `invoke` operation: completed, or failed/cancelled. */
  ChildCompleted: "ChildCompleted",
  ChildFailed: "ChildFailed",
  /** A per-wait webhook URL was called (`hook.wait()` returns the request), or it expired first (throws WebhookExpiredError). */
  WebhookReceived: "WebhookReceived",
  WebhookExpired: "WebhookExpired",
  CompensationExecuted: "CompensationExecuted",
  CompensationFailed: "CompensationFailed",
} as const;

export type HistoryEventType = (typeof EV)[keyof typeof EV];

export type ChannelMode = "broadcast" | "competing" | "direct";

/**
 * A normalized event match (core/match.ts): what a message's document
 * `{ data, meta }` must contain (jsonb `@>`) for a matching wait to take it.
 */
export interface MatchDocument {
  data?: Record<string, unknown>;
  meta?: Record<string, unknown>;
}

export type Payload = { type: "json"; json: string } | { type: "binary"; bytes: Uint8Array };

export interface HistoryEvent {
  id: number;
  activityId: string;
  eventType: string;
  data: Payload;
  createdAt: Date;
}

export interface NewHistoryEvent {
  activityId: string;
  eventType: string;
  data: Payload;
}

/** An instance's tags (search attributes; checked in core/tags.ts), at most MAX_TAGS of them: the storage layer bounds them too. */
export type Tags = Record<string, string>;
export const MAX_TAGS = 16;
