/**
 * The shared model: what the replay core and the storage layer both speak
 * about — history event types, wait kinds, instance statuses, payloads and
 * history rows.
 * A leaf module (it imports nothing), so storage depends on this file and not
 * on the rest of `core`, and each name is defined exactly once.
 */

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

/**
 * Every kind of wait an operation can open (the `kind` of core/replay.ts's
 * `WaitRequest`), declared once. Each list that names the kinds is derived
 * from this table: the waiting statuses (and so the instance table's CHECK,
 * schema.ts), the records that settle a wait (replay's primary events), the
 * sweep's expiry tasks with their failure task and report counter, the
 * viewer's and MCP's words for an instance in the wait, and the kinds a race's
 * webhook branch can stand beside. What the engine does with a kind
 * (prepare, conclude, expire) is engine/wait-kinds.ts's table, a mapped type
 * over these keys; the SQL of a kind is its storage module's. So a new kind is
 * one entry here, one variant of `WaitRequest`, one row there, its SQL and its
 * operation: whatever is missing fails to compile (docs/design.md, "A new wait kind").
 */
const DECLARED_WAIT_KINDS = [
  {
    kind: "timer",
    status: "waiting_for_timer",
    events: [EV.TimerExpired],
    expiry: { task: "timers", counter: "timersFired", priority: true },
    hookBranch: false,
    view: { says: "sleeping until a timer fires", pollIntervalMs: 5000, span: true },
    why: { next: "its timer fires at `until` (the in-process wake-up or the next sweep); cancel it to stop it sooner" },
  },
  {
    kind: "message",
    status: "waiting_for_message",
    events: [EV.MessageReceived, EV.MessageTimeout],
    expiry: { task: "message_timeouts", counter: "messageWaitsExpired", priority: true },
    hookBranch: true,
    view: { says: "waiting for a message", pollIntervalMs: 30_000, span: true },
    why: { next: "a message on its channel (POST /instances/{id}/messages, or a publish to the channel), or its timeout; cancel it to stop waiting" },
  },
  /** Waiting for a child workflow's outcome (`invoke`): it never comes due by itself, the child's end records it. */
  {
    kind: "child",
    status: "waiting_for_child",
    events: [EV.ChildCompleted, EV.ChildFailed],
    expiry: null,
    hookBranch: false,
    view: { says: "waiting for a child workflow", pollIntervalMs: 5000, span: false },
    why: { next: "the child's end (see its own why); cancel the child to end it, or cancel this instance (its non-detached children end with it)" },
  },
  /** Waiting for a POST to a per-wait URL (`createWebhook` … `hook.wait()`), or its expiry. */
  {
    kind: "webhook",
    status: "waiting_for_webhook",
    events: [EV.WebhookReceived, EV.WebhookExpired],
    // A webhook's expiry rotates with the other sweep tasks: it ends a wait of minutes or days, where a
    // sweep or so of lag is harmless, and the first tick that fires a timer must stay inside a Free budget.
    expiry: { task: "webhook_expiry", counter: "webhookWaitsExpired", priority: false },
    hookBranch: true,
    view: { says: "waiting for a POST to its webhook URL", pollIntervalMs: 30_000, span: true },
    why: { next: "a POST to its webhook URL, or the URL's expiry; cancel it to stop waiting" },
  },
] as const satisfies readonly WaitKindDeclaration[];

/** What a wait kind declares (see WAIT_KINDS). */
export interface WaitKindDeclaration {
  /** The `kind` of its `WaitRequest` (core/replay.ts) and its key in WAIT_KINDS. */
  kind: string;
  /** The instance's status while it waits. */
  status: `waiting_for_${string}`;
  /** The history records that settle the wait. */
  events: readonly HistoryEventType[];
  /**
   * How the wait comes due by itself, or null (it ends only when something else records its outcome):
   * the sweep task that expires it (also the failure task of a poison row), the sweep report's counter,
   * and whether the task runs first in a sweep with a CPU budget.
   */
  expiry: { task: ExpiryTask; counter: ExpiryCounter; priority: boolean } | null;
  /** Whether a race's webhook branch can stand beside this wait (the instance then listens for the hook's POST too). */
  hookBranch: boolean;
  view: {
    /** What an operator is told the instance does (MCP task status). */
    says: string;
    /** How long a client should wait before asking again (MCP). */
    pollIntervalMs: number;
    /** Whether a step that concludes in this wait gets an `edda.wait {kind}` span. */
    span: boolean;
  };
  /** `GET /instances/:id/why`: the reason's kind is the wait's own; `next` says in one sentence what moves it (engine/why.ts fills in the facts). */
  why: { next: string };
}

export type WaitKind = (typeof DECLARED_WAIT_KINDS)[number]["kind"];
type Declared = (typeof DECLARED_WAIT_KINDS)[number];
/** Each wait kind's declaration by its kind. */
export const WAIT_KINDS = Object.fromEntries(DECLARED_WAIT_KINDS.map((d) => [d.kind, d])) as { [K in WaitKind]: Extract<Declared, { kind: K }> };
export type WaitStatus = Declared["status"];

/**
 * The sweep tasks that expire waits, one per wait kind that comes due by
 * itself (also where a poison row's failure is counted: FailureTask). Spelled
 * out here, beside the declarations, because the public API names them
 * (SweepTask, FailureTask); the compiler holds the two together both ways.
 */
export type ExpiryTask = "timers" | "message_timeouts" | "webhook_expiry";
/**
 * The sweep report's counter of each expiry task: `timersFired`,
 * `messageWaitsExpired` (receive timeouts), `webhookWaitsExpired` (per-wait
 * webhook URLs that expired unused). Spelled out and checked like ExpiryTask.
 */
export type ExpiryCounter = "timersFired" | "messageWaitsExpired" | "webhookWaitsExpired";
type DeclaredExpiry = Exclude<Declared["expiry"], null>;
// Every public expiry task and counter belongs to a declared kind (the declaration's type covers the other way).
const _everyExpiryDeclared: [ExpiryTask, ExpiryCounter] extends [DeclaredExpiry["task"], DeclaredExpiry["counter"]] ? true : never = true;

const DECLARED: readonly WaitKindDeclaration[] = DECLARED_WAIT_KINDS;
/** The waiting statuses, in table order (a tuple, so INSTANCE_STATUSES stays one). */
export const WAIT_STATUSES = DECLARED_WAIT_KINDS.map((d) => d.status) as unknown as StatusesOf<typeof DECLARED_WAIT_KINDS>;
type StatusesOf<T extends readonly { status: string }[]> = { [I in keyof T]: T[I]["status"] };
/** The records that settle a wait, of every kind. */
export const WAIT_EVENTS: readonly HistoryEventType[] = DECLARED.flatMap((d) => d.events);
/** The statuses in which an instance can be listening for a webhook branch's POST (its own wait, or a race's). */
export const HOOK_LISTENING_STATUSES = DECLARED.filter((d) => d.hookBranch).map((d) => d.status) as WaitStatus[];

/** The kind whose waiting status this is, with its declaration, if any. */
export function waitKindOf(status: string): (WaitKindDeclaration & { kind: WaitKind }) | undefined {
  return DECLARED_WAIT_KINDS.find((d) => d.status === status);
}

/**
 * Why an unfinished instance is not moving (`GET /instances/:id/why`, engine/why.ts): one kind per
 * wait kind (its declaration's `why`), the wait variants `event` (a message wait of `waitEvent`) and
 * `retry_backoff` (a timer that schedules an activity's next attempt), flow control's reasons for a
 * `queued` instance, the lease's three states of a runnable one, the code it waits for, quarantine,
 * and `none` (finished).
 */
export const WHY_KINDS = [
  "running",
  ...DECLARED_WAIT_KINDS.map((d) => d.kind),
  "event",
  "retry_backoff",
  "concurrency",
  "rate_limit",
  "debounce",
  "leased",
  "dispatch_pending",
  "pinned",
  "parked",
  "quarantined",
  "none",
] as const satisfies readonly string[] as unknown as readonly [WhyKind, ...WhyKind[]];
export type WhyKind = "running" | "timer" | "message" | "child" | "webhook" | "event" | "retry_backoff" | "concurrency" | "rate_limit" | "debounce" | "leased" | "dispatch_pending" | "pinned" | "parked" | "quarantined" | "none";
// Spelled out for the public API (as ExpiryTask is); every declared wait kind is a reason kind.
const _everyWaitKindIsAReason: WaitKind extends WhyKind ? true : never = true;

/** Every status an instance can have; the waiting ones come from WAIT_KINDS, one per kind. */
export const INSTANCE_STATUSES = [
  "running",
  ...WAIT_STATUSES,
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
export const CANCELLABLE_STATUSES: readonly InstanceStatus[] = ["running", ...WAIT_STATUSES, "parked", "quarantined", "queued"];
export const TERMINAL_STATUSES: readonly InstanceStatus[] = ["completed", "failed", "cancelled"];

/**
 * The activity id prefix of a saga compensation's records: `compensate:{registered activity id}`, its failed
 * attempts `…#n` and retry timers `…#retryn`. Such a record in history means the body is over (engine/decide.ts `phase`).
 */
export const COMPENSATION_PREFIX = "compensate:";

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
