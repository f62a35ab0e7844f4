/**
 * What engine modules receive instead of the engine: each exported function
 * names the parts it uses (`Uses<"storage" | "dispatcher" | "workflows">`), so
 * a module depends on storage, the dispatcher, the registry and a few
 * settings — never on `Engine`, which is only the facade that owns one set of
 * these parts (engine.ts). A leaf of the engine's import graph: it imports
 * types only, from modules below the engine.
 */
import type { Workflow } from "../core/definitions.ts";
import type { ActivityRegistry } from "../core/registry.ts";
import type { WebhookLinks } from "../core/replay.ts";
import type { RetryPolicy } from "../core/retry.ts";
import type { ErrorClass, ErrorViewOptions } from "../core/serialization.ts";
import type { ConcludeResult, Fence, LeasedInstance, RunsFor, StepConclusion, Storage } from "../storage/types.ts";
import type { Dispatcher } from "./dispatcher.ts";
import type { EngineHooks } from "./hooks.ts";
import type { WarmRuns } from "./warm-runs.ts";

// Outbox relay settings (`EngineOptions.outbox`); public, documented field by field.
export interface OutboxOptions {
  /** Where events are POSTed (EDDA_BROKER_URL). Without it nothing is relayed and rows stay pending. */
  brokerUrl?: string;
  /** Failed attempts before a row is expired (default 10). */
  maxRetries?: number;
  /** Rows older than this are expired instead of sent (default 24 h). */
  maxAgeSeconds?: number;
  /** First retry delay; doubles per attempt (default 2 s). */
  initialBackoffSeconds?: number;
  /** Cap of the retry delay (default 600 s). */
  maxBackoffSeconds?: number;
  /** Per-POST timeout (default 10 s). */
  timeoutMs?: number;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
}

/** Retention of what the sweeper deletes, in seconds (each default 7 days). */
export interface RetentionOptions {
  /** Completed, failed and cancelled instances, counted from their last update, with their history, archived runs, compensations and subscriptions. */
  finishedInstancesSeconds?: number;
  /** Channel messages, counted from their publication (one claimed within the window is kept). */
  channelMessagesSeconds?: number;
  /** CloudEvent `(source, id)` dedupe records: a redelivery after this is accepted again. */
  cloudEventDedupeSeconds?: number;
}

/** What the engine's modules need of tracing (tracing.ts `Tracing` has it): trace contexts to store and pass on. */
export interface TraceLinks {
  /** The traceparent a new instance's run continues (stored with it), or null. */
  started(workflowName: string, instanceId: string, traceparent?: string): string | null;
  /** The traceparent of an activity attempt's span (outgoing events carry it). */
  activityTraceparent(instanceId: string, activityId: string, attempt: number): string | null;
}

/** What the engine's modules report to metrics (metrics.ts `Metrics` has it). */
export interface MetricsSink {
  /** A step ended: the workflow (when the step got that far), its outcome, its duration. */
  step(workflowName: string | undefined, outcome: string, seconds: number): void;
  /** An instance was set aside after repeated failures of `task`. */
  quarantined(task: string): void;
  leasesTakenOver(n: number): void;
  sweepTask(task: string, result: "ok" | "failed" | "skipped", seconds: number): void;
  /** Sample the gauges only the database knows (one read-only statement); `registered`: this app's workflows (others count as pinned). */
  sampleGauges(storage: Storage, registered?: readonly string[]): Promise<void>;
}

/** What a step uses of group commit (group-commit.ts `GroupCommit` has it). */
export interface LoneConclusions {
  /** A step's conclusion outside any transaction, fenced; written with others of the same turn. */
  conclude(fence: Fence, conclusion: StepConclusion): Promise<ConcludeResult>;
}

/** What a step uses of group load (group-load.ts `GroupLoad` has it). */
export interface LeasedReads {
  /** `loadLeased(fence)`: read with the other handed-off reads of the same turn. */
  load(fence: Fence): Promise<LeasedInstance | null>;
}

/** Each workflow's source hash, its definition recorded once per process (source-hashes.ts). */
export interface DefinitionRecorder {
  hash(wf: Workflow): Promise<string>;
  /** Record these workflows' definitions now, before a transaction that starts instances of them. */
  ensure(workflows: Iterable<Workflow>): Promise<void>;
}

/** The parts of one engine. */
export interface EngineParts {
  readonly storage: Storage;
  readonly dispatcher: Dispatcher;
  /** The registry of workflows, by name. */
  readonly workflows: ReadonlyMap<string, Workflow>;
  readonly activities: ActivityRegistry;
  readonly hooks: EngineHooks;
  readonly definitions: DefinitionRecorder;
  readonly tracing: TraceLinks | null;
  readonly metrics: MetricsSink | null;
  /** Runs kept in memory across in-process hand-offs (warm-runs.ts). */
  readonly warmRuns: WarmRuns;
  /** Lone conclusions of one turn in one statement (group-commit.ts); null: each its own. */
  readonly groupCommit: LoneConclusions | null;
  /** Handed-off reads of one turn in one statement (group-load.ts); null: each its own. */
  readonly leasedReads: LeasedReads | null;
  // Settings.
  readonly serviceName: string;
  /** This deployment's id (deployment.ts). */
  readonly deployment: () => Promise<string>;
  /** Which instances this deployment may run (versioning.ts): every claim passes it to storage. */
  readonly runs: () => Promise<RunsFor>;
  /** The expected sweep cadence in seconds (null: unknown); why.ts judges a sweep overdue by it. */
  readonly sweepIntervalSeconds: number | null;
  /** CPU one invocation may spend here (ms; null: unknown); why.ts warns when a history nears what fits in it (history-budget.ts). */
  readonly cpuBudgetMs: number | null;
  readonly workerId: string;
  readonly defaultLeaseSeconds: number;
  readonly handoffLeaseSeconds: number;
  readonly retryPolicy: RetryPolicy | undefined;
  readonly errorClasses: Record<string, ErrorClass>;
  readonly errorView: ErrorViewOptions;
  readonly quarantineAfter: number;
  /** Bytes of activity chunks one instance's stream may hold (EngineOptions.streams.maxBytes). */
  readonly streamMaxBytes: number;
  readonly retention: Required<RetentionOptions>;
  /** Relay settings when a broker is configured, else null. */
  readonly outbox: OutboxOptions | null;
  /**
   * Wall time in JS (ms since the epoch) where workflow semantics read it:
   * `ctx.now()`, absolute deadlines turned into delays, a schedule's first
   * tick. `Date.now` in production; the test kit passes its test clock.
   * Leases, timers and windows never use it: they run on the database clock.
   */
  readonly clock: () => number;
  /** What per-wait webhook URLs are derived from (EDDA_SECRET, EDDA_PUBLIC_URL); null without a secret. */
  readonly webhookLinks: WebhookLinks | null;
}

/** The parts a function uses. */
export type Uses<K extends keyof EngineParts> = Pick<EngineParts, K>;
