/**
 * The shapes of `GET /instances/:id/why` (engine/why.ts builds them): a leaf of types, so the
 * instance view (views.ts) and the typed client name them without importing the engine's code.
 */
import type { InstanceStatus, WhyKind } from "../core/model.ts";
import type { FailureTask } from "../storage/types.ts";

/** The facts of each kind of reason, beside its sentence (`detail`). Times are ISO 8601. */
export interface WhyFacts {
  running: { activityId: string | null; engine: string; leaseExpiresAt: string | null };
  /**
   * `lastSweepAt` (here and below): when the sweep task that moves it (timers, stale_leases, resumable) last ran, null if never;
   * `sweepOverdue`: it has not run for five times the sweep cadence this app expects (`sweepIntervalSeconds`), or never has.
   */
  timer: { timerId: string; activityId: string; dispatcherWakeUp: boolean; lastSweepAt: string | null; sweepOverdue: boolean };
  message: { channel: string; mode: string; activityId: string; timeoutAt: string | null; lastMessage: { messageId: string; publishedAt: string } | null };
  event: { type: string; activityId: string; match: unknown; timeoutAt: string | null; lastEvent: { messageId: string; publishedAt: string } | null };
  child: { activityId: string | null; children: { instanceId: string; workflowName: string; status: InstanceStatus; why: { kind: WhyKind; detail: string } | null }[] };
  webhook: { hookId: string | null; waitId: string | null; expiresAt: string | null };
  concurrency: { key: string; limit: number | null; holders: string[]; ahead: number };
  rate_limit: { key: string; limit: number | null; periodSeconds: number | null; admittedInWindow: number; ahead: number };
  debounce: { key: string; notBefore: string | null };
  retry_backoff: { activityId: string; activityName: string | null; attempt: number; maxAttempts: number | null; lastError: { type: string; message: string } | null; nextAttemptAt: string; lastSweepAt: string | null; sweepOverdue: boolean };
  leased: { engine: string; expiredAt: string | null; lastSweepAt: string | null; sweepOverdue: boolean };
  dispatch_pending: { idleSince: string; lastSweepAt: string | null; sweepOverdue: boolean };
  /**
   * Its workflow is not registered here (`versioning` null), or it is on another deployment no engine serves:
   * `deployment` (the one it needs), `lastSeenAt` (that deployment's last sweep), `replayRefused` (this code's mismatch).
   */
  pinned: { workflowName: string; sourceHash: string; deployment: string | null; currentDeployment: string; lastSeenAt: string | null; versioning: "pinned" | "auto" | null; replayRefused: string | null };
  parked: { activityId: string | null; parkedHash: string | null; deployedHash: string | null; error: string };
  /** The failure that set it aside (the instance view's `failure`). */
  quarantined: { task: FailureTask; errorType: string; message: string; at: string; attempts: number; previousStatus: InstanceStatus | null } | { task: null };
  none: { status: InstanceStatus };
}

/** A history nearing what a cold step replays within the platform's CPU budget per invocation (engine/history-budget.ts). */
export interface HistoryBudget {
  /** Entries in the current run's history. */
  entries: number;
  /** A cold step's CPU at that size, estimated from the measured cost (ms). */
  estimatedCpuMs: number;
  /** The CPU one invocation may spend here (ms). */
  cpuBudgetMs: number;
  /** The history a cold step replays within the budget, at the measured cost. */
  fitsEntries: number;
  /** One sentence for a reader: how near, and what to do. */
  detail: string;
}

/** The reason of one kind: its common fields and the kind's facts. */
export interface WhyReasonOf<K extends WhyKind> {
  kind: K;
  /** Since when it has been in this state (ISO 8601). */
  since: string | null;
  /** When it moves by itself, if it will (a timer's expiry, a rate window, a lease's end). */
  until?: string;
  /** The instance ids (or flow-control keys, engine ids) it waits behind. */
  blockedBy?: string[];
  /** One sentence of what it waits for. */
  detail: string;
  /** One sentence of what will move it, and what an operator can do (send, resume, rerun, cancel). */
  next: string;
  facts: WhyFacts[K];
  /**
   * When the current run's history nears (80 %) or passes the size a cold step replays within this platform's
   * CPU budget per invocation (engine/history-budget.ts): a step past it is ended by the platform and never
   * concludes. Absent when it is not near, the instance has finished, or the app knows no budget (Node).
   */
  historyBudget?: HistoryBudget;
}

/** Why an instance is where it is: a keyed union over WHY_KINDS. */
export type WhyReason = { [K in WhyKind]: WhyReasonOf<K> }[WhyKind];

export interface WhyView {
  instanceId: string;
  status: InstanceStatus;
  reason: WhyReason;
}

