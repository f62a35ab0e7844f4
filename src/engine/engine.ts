/**
 * The engine: registered workflows + storage + dispatcher. Starts, cancels and
 * inspects instances, runs steps, and sweeps. Stateless between calls — every
 * fact lives in Postgres — so any number of engines (requests, processes,
 * isolates) can share one database.
 *
 * A thin facade: it owns one set of parts (`EngineParts`, deps.ts) and hands
 * them to the modules that do the work, each of which names the parts it uses
 * (`Uses<…>`) and none of which imports this file.
 */
import type { Workflow } from "../core/definitions.ts";
import { checkStoredName, ConflictError, NotFoundError, ValidationError } from "../core/errors.ts";
import { ActivityRegistry } from "../core/registry.ts";
import type { RetryPolicy } from "../core/retry.ts";
import type { WebhookLinks } from "../core/replay.ts";
import { fromJson, historyDataView, toStoredJson, toStoredPayload, type ErrorClass, type ErrorViewOptions } from "../core/serialization.ts";
import type { BulkFilter, BulkOperationRecord, InstanceFilter, InstanceRecord, InstanceStatus, ListInstancesQuery, RunsFor, ScheduleRecord, Storage, WebhookFire } from "../storage/types.ts";
import { LocalDispatcher, type Dispatcher, type DispatchScope, type StepRequest, type StepRunner } from "./dispatcher.ts";
import { guardHooks, type EngineHooks } from "./hooks.ts";
import { runStep, type StepResult } from "./step.ts";
import { notifyPublished } from "./channels.ts";
import { notifyOutbox } from "./outbox.ts";
import type { EngineParts, OutboxOptions, RetentionOptions } from "./deps.ts";
import { SourceHashes } from "./source-hashes.ts";
import { afterStart, createValidated, validateInput, type Created, type ParentLink, type StartOptions } from "./starts.ts";
import { WarmRuns } from "./warm-runs.ts";
import { GroupCommit, type GroupCommitOptions } from "./group-commit.ts";
import { GroupLoad } from "./group-load.ts";
import { deploymentOf, deploymentsView, type DeploymentsView } from "./deployment.ts";
import { runsOf, upgradeInstance, type UpgradeResult } from "./versioning.ts";
import { awaitFinished } from "./results.ts";
import { combineHooks, Tracing, type TracingApi } from "./tracing.ts";
import { metricsFor, type Metrics, type MetricsApi } from "./metrics.ts";
import { sweep, type SweepOptions, type SweepReport } from "./sweeper.ts";
import { DEFAULT_QUARANTINE_AFTER, type Isolation } from "./poison.ts";
import { EXPIRIES, expireDue } from "./wait-kinds.ts";
import { deliverToWebhook, deliveryOf } from "./webhook-waits.ts";
import { endInstanceTree, expireDeadlines, resumeIn } from "./lifecycle.ts";
import { checkScheduledInputs, listAppSchedules, pauseSchedule, resumeSchedule, triggerSchedule } from "./schedules.ts";
import { fork, rerunIn, type Forked, type Repaired } from "./repairs.ts";
import { countMatching, createBulk, driveBulk, driveInBackground, type BulkRequest } from "./bulk.ts";
import { startTimedStarts } from "./flow-control.ts";
import { sealPayloads } from "./payload-sealing.ts";
import { DEFAULT_LARGE_VALUE_BYTES, MAX_INSTANCE_BYTES, postgresValues, type LargeValueStore } from "../storage/payload-refs.ts";
import type { PayloadCodec } from "../core/payload-codec.ts";
import * as inspection from "./inspection.ts";
import { openStream, StreamHub, type StreamEvent, type StreamReadOptions } from "./stream-reader.ts";
import { ingest, type IngestResult, type PreparedEvent } from "./ingestion.ts";
import { HISTORY_PAGE_MAX, toView, waitWebhookView, type HistoryEntry, type InstanceDetail, type InstanceView } from "./views.ts";
import { reasonOfRecord, whyOf, type WhyReason, type WhyView } from "./why.ts";

export { HISTORY_PAGE_MAX, toView };
export type { RetentionOptions, StartOptions };
export type { HistoryEntry, InstanceDetail, InstanceFailureView, InstanceView } from "./views.ts";
export type { WhyFacts, WhyReason, WhyView } from "./why.ts";

export interface EngineOptions {
  storage: Storage;
  workflows: Workflow[];
  /** The app's activities (shared by the engines of one app; default: a registry of this engine's own). */
  activities?: ActivityRegistry;
  dispatcher: Dispatcher;
  serviceName?: string;
  /**
   * How often sweeps run against this database, in seconds (the adapters set it: Node's sweep interval, a
   * Worker's or Deno's cron minute; `EDDA_SWEEP_EXPECTED_SECONDS`). `why` and `/readyz` call a sweep task that has
   * not run for five times this overdue. Null (the default): unknown, never overdue.
   */
  sweepIntervalSeconds?: number | null;
  /** CPU one invocation may spend (ms; null: no limit known): why.ts warns when a history nears what a cold step replays within it. */
  cpuBudgetMs?: number | null;
  /** This deployment's id, recorded on every instance it starts (engine/deployment.ts); default: the code's hash. */
  deployment?: string;
  workerId?: string;
  /** Lease length for a step (default 300 s; per-workflow `lockTimeoutSeconds` wins). */
  leaseSeconds?: number;
  /** Lease handed to a follow-up step; if the follow-up is lost it expires and the sweeper resumes (default 30 s). */
  handoffLeaseSeconds?: number;
  retryPolicy?: RetryPolicy;
  hooks?: EngineHooks;
  /** Error classes restored by name when a recorded error is replayed. */
  errorClasses?: ErrorClass[];
  /** Outbox relay settings; without a broker URL rows stay pending. */
  outbox?: OutboxOptions;
  /**
   * Show stored error stacks in instance views (default false: type, message
   * and cause chain only). Stacks stay stored either way; turn this on only
   * where every API caller may read server internals (development).
   */
  exposeErrorStacks?: boolean;
  /** The `@opentelemetry/api` module: spans per step, activity attempt, wait and compensation (tracing.ts). */
  tracing?: TracingApi;
  /** The `@opentelemetry/api` module (or any `{ metrics: MeterProvider }`): counters, histograms and gauges (metrics.ts). */
  metrics?: MetricsApi;
  /**
   * Failures in a row (a step that throws, a timer or delivery that cannot be
   * recorded) after which an instance is set aside as `quarantined` (default 5).
   */
  quarantineAfterFailures?: number;
  /** How long finished instances, channel messages and CloudEvent dedupe rows are kept (default 7 days each). */
  retention?: RetentionOptions;
  /**
   * Realtime streams: `maxBytes` of activity chunks per instance (default 8 MiB; past it
   * `ctx.stream.write` throws StreamLimitError); `wake`: how readers learn of new items —
   * `listen` (one shared LISTEN per engine, the default where the driver can) or `poll`
   * (bounded back-off, for a database opened per request).
   */
  streams?: { maxBytes?: number; wake?: "listen" | "poll" };
  /** See EngineParts.clock (default `Date.now`; `edda-edge/testing` passes its test clock). */
  clock?: () => number;
  /**
   * Group commit (group-commit.ts): the lone conclusions of steps ready in the same turn of the event
   * loop go as one multi-row fenced statement, at most `maxBatch` (default 64). On by default where the
   * storage is not itself a transaction; `false`: every step concludes in a statement of its own.
   */
  groupCommit?: GroupCommitOptions | false;
  /** The key per-wait webhook URLs (`createWebhook`) are derived from (EDDA_SECRET) and the public URL they start with (EDDA_PUBLIC_URL). */
  webhookLinks?: WebhookLinks;
  /**
   * Payloads sealed at rest (inputs, outputs, history records, messages, stream items, compensation
   * arguments): `encryptionCodec(keys)` for AES-256-GCM (EDDA_ENCRYPTION_KEY), or your own KMS.
   * Without one, a sealed payload read from the database is a PayloadDecryptionError.
   */
  payloadCodec?: PayloadCodec;
  /**
   * Large values by reference: an input, output or history record whose stored text is over
   * `thresholdBytes` (default 256 KiB; Infinity: never) is kept once in `workflow_payloads` and its row
   * holds a reference (docs/payloads.md). `maxInstanceBytes` (default `MAX_INSTANCE_BYTES`, 256 MiB) bounds
   * what one instance holds: a value by reference that would take it past is a PayloadTooLargeError.
   */
  largeValues?: { thresholdBytes?: number; store?: LargeValueStore; maxInstanceBytes?: number };
}

export const DEFAULT_STREAM_MAX_BYTES = 8 * 1024 * 1024;

export const DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600;

export class Engine implements StepRunner, EngineParts {
  readonly storage: Storage;
  readonly dispatcher: Dispatcher;
  readonly workflows = new Map<string, Workflow>();
  readonly activities: ActivityRegistry;
  readonly serviceName: string;
  readonly deployment: () => Promise<string>;
  readonly runs: () => Promise<RunsFor>;
  readonly sweepIntervalSeconds: number | null;
  readonly cpuBudgetMs: number | null;
  readonly workerId: string;
  readonly defaultLeaseSeconds: number;
  readonly handoffLeaseSeconds: number;
  readonly retryPolicy: RetryPolicy | undefined;
  readonly hooks: EngineHooks;
  readonly errorClasses: Record<string, ErrorClass>;
  /** How instance views show stored errors (see `exposeErrorStacks`). */
  readonly errorView: ErrorViewOptions;
  /** Relay settings when a broker is configured, else null. */
  readonly outbox: OutboxOptions | null;
  readonly definitions: SourceHashes;
  /** Runs kept in memory across in-process hand-offs (see warm-runs.ts). */
  readonly warmRuns = new WarmRuns();
  readonly tracing: Tracing | null;
  readonly metrics: Metrics | null;
  /** See EngineOptions.quarantineAfterFailures. */
  readonly quarantineAfter: number;
  readonly streamMaxBytes: number;
  /** The shared LISTEN of this engine's stream readers (null: they poll). */
  readonly streamHub: StreamHub | null;
  readonly retention: Required<RetentionOptions>;
  readonly clock: () => number;
  readonly webhookLinks: WebhookLinks | null;
  /** Starts are created leased to their first step (the local dispatcher runs it in this process). */
  private readonly startsLeased: boolean;
  readonly groupCommit: GroupCommit | null;
  readonly leasedReads: GroupLoad | null;

  constructor(opts: EngineOptions) {
    const storage = sealPayloads(opts.storage, { codec: opts.payloadCodec ?? null, thresholdBytes: opts.largeValues?.thresholdBytes ?? DEFAULT_LARGE_VALUE_BYTES, store: opts.largeValues?.store ?? postgresValues, maxInstanceBytes: opts.largeValues?.maxInstanceBytes ?? MAX_INSTANCE_BYTES });
    this.storage = storage;
    // Over a transaction (a Storage with afterCommit) a failed group would abort it: no fallback there.
    const inTransaction = typeof (storage as { afterCommit?: unknown }).afterCommit === "function";
    this.groupCommit = opts.groupCommit === false || inTransaction ? null : new GroupCommit(storage, opts.groupCommit);
    // The handed-off reads of one turn go together where the conclusions do (the same option turns both off).
    this.leasedReads = this.groupCommit ? new GroupLoad(storage, opts.groupCommit ? opts.groupCommit.maxBatch : undefined) : null;
    this.clock = opts.clock ?? Date.now;
    this.definitions = new SourceHashes(storage);
    this.quarantineAfter = Math.max(1, Math.trunc(opts.quarantineAfterFailures ?? DEFAULT_QUARANTINE_AFTER));
    this.streamMaxBytes = Math.max(0, Math.trunc(opts.streams?.maxBytes ?? DEFAULT_STREAM_MAX_BYTES));
    this.streamHub = opts.streams?.wake === "poll" ? null : new StreamHub(storage);
    this.retention = {
      finishedInstancesSeconds: opts.retention?.finishedInstancesSeconds ?? DEFAULT_RETENTION_SECONDS,
      channelMessagesSeconds: opts.retention?.channelMessagesSeconds ?? DEFAULT_RETENTION_SECONDS,
      cloudEventDedupeSeconds: opts.retention?.cloudEventDedupeSeconds ?? DEFAULT_RETENTION_SECONDS,
    };
    this.activities = opts.activities ?? new ActivityRegistry();
    this.tracing = opts.tracing ? new Tracing(opts.tracing) : null;
    this.metrics = opts.metrics ? metricsFor(opts.metrics) : null;
    this.dispatcher = this.tracing ? this.tracing.dispatcher(dispatchingAs(opts.dispatcher, this)) : dispatchingAs(opts.dispatcher, this);
    for (const wf of opts.workflows) {
      const prior = this.workflows.get(wf.workflowName);
      if (prior) {
        const line = (w: Workflow) => w.source.split("\n")[0]!.slice(0, 80);
        throw new TypeError(`workflow "${wf.workflowName}" registered twice: first as ${line(prior)} …, again as ${line(wf)} …`);
      }
      this.workflows.set(wf.workflowName, wf);
    }
    this.serviceName = opts.serviceName ?? "edda-edge";
    this.deployment = deploymentOf(opts.deployment, opts.workflows);
    this.runs = runsOf(this.deployment, opts.workflows);
    this.sweepIntervalSeconds = opts.sweepIntervalSeconds && opts.sweepIntervalSeconds > 0 ? opts.sweepIntervalSeconds : null;
    this.cpuBudgetMs = opts.cpuBudgetMs && opts.cpuBudgetMs > 0 ? opts.cpuBudgetMs : null;
    this.workerId = opts.workerId ?? `${this.serviceName}:${crypto.randomUUID().slice(0, 8)}`;
    this.defaultLeaseSeconds = opts.leaseSeconds ?? 300;
    this.handoffLeaseSeconds = opts.handoffLeaseSeconds ?? 30;
    this.retryPolicy = opts.retryPolicy;
    let user = this.tracing ? combineHooks(opts.hooks ?? {}, this.tracing.hooks) : (opts.hooks ?? {});
    if (this.metrics) user = combineHooks(user, this.metrics.hooks);
    this.hooks = guardHooks(user);
    this.outbox = opts.outbox?.brokerUrl ? opts.outbox : null;
    this.errorView = { stacks: opts.exposeErrorStacks ?? false };
    this.webhookLinks = opts.webhookLinks?.key ? opts.webhookLinks : null;
    this.errorClasses = Object.fromEntries((opts.errorClasses ?? []).map((C) => [new C("").name, C]));
    checkScheduledInputs(this.workflows.values());
    this.startsLeased = opts.dispatcher instanceof LocalDispatcher;
    opts.dispatcher.attach(this);
  }

  workflow(name: string): Workflow {
    const wf = this.workflows.get(name);
    if (!wf) throw new NotFoundError(`unknown workflow "${name}"`);
    return wf;
  }

  /** Check the input against the workflow's schema; returns the parsed value. */
  validateInput(wf: Workflow, input: unknown): unknown {
    return validateInput(wf, input);
  }

  /** Validate input, record the definition, create the instance and dispatch its first step. */
  async start(workflow: Workflow | string, input: unknown, opts: StartOptions = {}, scope?: DispatchScope): Promise<{ instanceId: string; status: InstanceStatus; created: boolean }> {
    const wf = typeof workflow === "string" ? this.workflow(workflow) : this.workflow(workflow.workflowName);
    const value = this.validateInput(wf, input);
    // With the local dispatcher the first step runs in this process: the start leases the instance to it, and it
    // begins from the created row (empty history) without a statement of its own to take the lease and read.
    const lease = this.startsLeased ? { workerId: this.workerId, leaseSeconds: this.handoffLeaseSeconds } : undefined;
    const r = await createValidated(this, this.storage, wf, value, { ...opts, ...(lease ? { lease } : {}) });
    if (r.leased) {
      const { instance, fence } = r.leased;
      this.warmRuns.put(r.instanceId, { workerId: fence.workerId, token: fence.token, instance, run: null, next: null, expiresAt: Date.now() + this.handoffLeaseSeconds * 1000 * 0.8 });
    }
    if (r.created) afterStart(this, wf, r.instanceId, value, scope, r.traceContext, r.leased ? { workerId: r.leased.fence.workerId, token: r.leased.fence.token } : undefined);
    // A queued rate-limited or debounced start is admitted when its time comes (flow-control.ts); the sweep is the floor.
    if (r.wakeInSeconds !== undefined) this.dispatcher.wakeIn?.(r.wakeInSeconds, scope);
    return r;
  }

  /** Create an instance whose input is already validated, on `storage` (possibly a transaction); `link` makes it a child. */
  createValidated(storage: Storage, wf: Workflow, value: unknown, opts: StartOptions, link?: ParentLink): Promise<Created> {
    return createValidated(this, storage, wf, value, opts, link);
  }

  /** After the creating commit: hook + first step. */
  afterStart(wf: Workflow, instanceId: string, input: unknown, scope?: DispatchScope, traceparent?: string | null): void {
    afterStart(this, wf, instanceId, input, scope, traceparent);
  }

  /** Publish a message from outside any workflow; subscribers wake after the commit. */
  async publish(channel: string, data: unknown, opts: { metadata?: Record<string, unknown>; targetInstanceId?: string } = {}, scope?: DispatchScope): Promise<string> {
    // Checked here, not only by the routes: a name the column cannot hold must be a typed error, never a database error.
    checkStoredName("channel", channel);
    if (opts.targetInstanceId !== undefined) checkStoredName("targetInstanceId", opts.targetInstanceId);
    const msg = await this.storage.publishMessage({
      channel,
      data: toStoredPayload(data, `message data on channel "${channel}"`),
      metadata: opts.metadata ? toStoredJson(opts.metadata, `message metadata on channel "${channel}"`) : null,
      targetInstanceId: opts.targetInstanceId ?? null,
    });
    this.notifyPublished(channel, scope);
    return msg.messageId;
  }

  /** Event-handler workflows by the CloudEvent type that starts them. */
  eventHandler(type: string): Workflow | undefined {
    for (const wf of this.workflows.values()) {
      const h = wf.options.eventHandler;
      if (h === true ? wf.workflowName === type : h === type) return wf;
    }
    return undefined;
  }


  /** Record these workflows' definitions now, outside any transaction (source-hashes.ts). */
  ensureDefinitions(workflows: Iterable<Workflow>): Promise<void> {
    return this.definitions.ensure(workflows);
  }

  /** The source hash of the deployed code of `wf` (its definition recorded on first use). */
  definitionHash(wf: Workflow): Promise<string> {
    return this.definitions.hash(wf);
  }

  runStep(req: StepRequest, scope?: DispatchScope): Promise<StepResult> {
    if (!this.tracing) return runStep(this, req, scope);
    // Follow-ups carry the run's traceparent; a step without one (sweeper, wake-ups) reads the stored one.
    const stored = () => this.storage.getTraceContext(req.instanceId);
    return this.tracing.step(req, stored, () => runStep(this, req, scope));
  }

  /** A follow-up that will not be sent: release its handed lease so the next sweep resumes the instance. */
  async deferStep(req: StepRequest): Promise<void> {
    if (!req.lease) return;
    this.warmRuns.take(req.instanceId, req.lease);
    const handed = { instanceId: req.instanceId, ...req.lease };
    // A cancel or deadline since the hand-off kept the lock for this step (storage endInstance): give that back.
    if (!(await this.storage.releaseLease(handed))) await this.storage.releaseFencedOut(handed);
  }

  /** A hand-off lease on `instanceId` for a follow-up sent over the network (null: not runnable, or leased). */
  async handOff(instanceId: string): Promise<{ workerId: string; token: number } | null> {
    const leased = await this.storage.acquireLease(instanceId, this.workerId, this.handoffLeaseSeconds, { runs: await this.runs() });
    return leased ? { workerId: leased.fence.workerId, token: leased.fence.token } : null;
  }

  /** Cancel an instance and its non-detached unfinished children (lifecycle.ts), in one transaction. */
  async cancel(instanceId: string, cancelledBy = "api", scope?: DispatchScope): Promise<{ status: InstanceStatus }> {
    const r = await endInstanceTree(this, instanceId, { kind: "cancel", cancelledBy }, scope);
    if (!r) throw new NotFoundError(`instance "${instanceId}" not found`);
    if (!r.ok) throw new ConflictError(`instance "${instanceId}" is ${r.status} and cannot be cancelled`);
    return { status: r.status };
  }

  /**
   * The instance's view and its children; with `history`, the first page of its history (at
   * most HISTORY_PAGE_MAX entries, `historyNextCursor` when there is more).
   */
  async getInstance(
    instanceId: string,
    opts: { history?: boolean } = {},
  ): Promise<InstanceDetail | null> {
    const inst = await this.storage.getInstance(instanceId);
    if (!inst) return null;
    const view: InstanceDetail = {
      ...toView(inst, this.errorView),
      children: await this.storage.listChildren(instanceId, 100),
      webhooks: (await this.storage.listWaitWebhooks(instanceId, 100)).map(waitWebhookView),
      tags: await this.storage.getInstanceTags(instanceId),
      why: await reasonOfRecord(this, inst),
    };
    if (opts.history) {
      const page = await this.historyPage(instanceId, { limit: HISTORY_PAGE_MAX });
      view.history = page.history;
      view.historyNextCursor = page.nextCursor;
    }
    return view;
  }

  /** One page of an instance's history (current run), in order; `after` is the previous page's `nextCursor`. */
  async historyPage(instanceId: string, opts: { after?: string; limit?: number } = {}): Promise<{ history: HistoryEntry[]; nextCursor: string | null }> {
    const after = opts.after === undefined ? 0 : Number(opts.after);
    if (!Number.isSafeInteger(after) || after < 0) throw new ValidationError("invalid history cursor", [{ path: ["after"], message: "not a cursor from a previous page" }]);
    const limit = Math.min(HISTORY_PAGE_MAX, Math.max(1, Math.trunc(opts.limit ?? 100)));
    const page = await this.storage.loadHistoryPage(instanceId, after, limit);
    return {
      history: page.events.map((e) => ({
        id: e.id,
        activityId: e.activityId,
        eventType: e.eventType,
        data: e.data.type === "json" ? historyDataView(fromJson(e.data.json), this.errorView) : { $binary: e.data.bytes.length },
        createdAt: e.createdAt.toISOString(),
      })),
      nextCursor: page.nextAfterId === null ? null : String(page.nextAfterId),
    };
  }

  /**
   * The whole history of the current run, page by page (each at most
   * HISTORY_PAGE_MAX entries, one bounded query each): an export streams it
   * without holding it all in memory.
   */
  async *historyPages(instanceId: string): AsyncGenerator<HistoryEntry[]> {
    let after: string | undefined;
    do {
      const page = await this.historyPage(instanceId, { limit: HISTORY_PAGE_MAX, ...(after !== undefined ? { after } : {}) });
      if (page.history.length) yield page.history;
      after = page.nextCursor ?? undefined;
    } while (after !== undefined);
  }

  /**
   * An operator's retry of a quarantined instance: back to the status it had
   * (its timers and waits were kept), failure count reset, and dispatched when
   * runnable. Its next failures count from zero.
   */
  async resume(instanceId: string, scope?: DispatchScope): Promise<{ status: InstanceStatus }> {
    const r = await this.storage.transaction((tx) => resumeIn(this, tx, instanceId, scope));
    if (!r) throw new NotFoundError(`instance "${instanceId}" not found`);
    if (!r.ok) throw new ConflictError(`instance "${instanceId}" is ${r.status}, not quarantined or parked`);
    return { status: r.status };
  }

  /** The reason of an instance whose row is already read (the viewer's page). */
  reasonOf(inst: InstanceRecord): Promise<WhyReason> {
    return reasonOfRecord(this, inst);
  }

  /** The reasons of a page of instances (the viewer's list), by id; each reads only what its kind needs. */
  async reasonsOf(instances: readonly InstanceRecord[]): Promise<Map<string, WhyReason>> {
    const reasons = new Map<string, WhyReason>();
    // One at a time: PGlite runs one statement at a time anyway, and a page is at most 100 rows.
    for (const inst of instances) reasons.set(inst.instanceId, await reasonOfRecord(this, inst, { historyBudget: false }));
    return reasons;
  }

  /** Move an unfinished instance to this deployment when its history replays with this code (versioning.ts). */
  async upgrade(instanceId: string, scope?: DispatchScope): Promise<UpgradeResult> {
    const r = await upgradeInstance(this, this.storage, instanceId);
    // Runnable and now this deployment's: its step is ours to run (a waiting one moves when its wait ends).
    if (r.runnable) this.dispatcher.dispatch({ instanceId }, scope);
    return r;
  }

  /** The deployments that started instances, with their unfinished ones by status (deployment.ts). */
  async deployments(limit = 100): Promise<DeploymentsView> {
    const [current, stored] = await Promise.all([this.deployment(), this.storage.listDeployments(limit)]);
    return deploymentsView(current, stored);
  }

  /** Why the instance is not moving and what will move it (why.ts); null when there is no such instance. */
  why(instanceId: string): Promise<WhyView | null> {
    return whyOf(this, instanceId);
  }

  /** The instance once it has finished, or as it is after `waitSeconds` (see results.ts). */
  async awaitInstance(instanceId: string, waitSeconds: number, signal?: AbortSignal): Promise<InstanceView | null> {
    const inst = await awaitFinished(this.storage, instanceId, waitSeconds, signal);
    return inst ? toView(inst) : null;
  }

  /** The live events of an instance's stream (stream-reader.ts); null when the instance does not exist. */
  openStream(instanceId: string, opts: StreamReadOptions): Promise<AsyncGenerator<StreamEvent> | null> {
    return openStream(this.storage, this.streamHub, instanceId, opts);
  }

  async findInstances(query: ListInstancesQuery): Promise<{ instances: InstanceView[]; nextCursor: string | null }> {
    const page = await this.storage.listInstances(query);
    return { instances: page.instances.map((i) => toView(i, this.errorView)), nextCursor: page.nextCursor };
  }

  /**
   * Fire due timers and expire due message waits; dispatch the instances they
   * made runnable. A batch that fails runs one instance at a time (poison
   * isolation, as in the sweeper), so one bad row does not hold up the others.
   */
  // --- reads and probes for the operator surfaces (inspection.ts) -----------------
  /** One page of stored instances (an InvalidArgumentError for a stale cursor). */
  listInstances(query: ListInstancesQuery) { return inspection.listInstances(this, query); }
  /** Instances matching `filter`, counted per status. */
  countInstances(filter: InstanceFilter) { return inspection.countInstances(this, filter); }
  /** The stored record of one instance, or null. */
  instanceRecord(instanceId: string) { return inspection.instanceRecord(this, instanceId); }
  instanceExists(instanceId: string): Promise<boolean> { return inspection.instanceExists(this, instanceId); }
  /** A bounded page of history, payloads cut at `maxChars`. */
  historyPreview(instanceId: string, opts: { afterId: number; limit: number; maxChars: number; run?: number }) { return inspection.historyPreview(this, instanceId, opts); }
  historyEvents(instanceId: string) { return inspection.historyEvents(this, instanceId); }
  /** An instance with its timers, subscriptions, groups, compensations, runs and children, or null. */
  instanceInspection(instanceId: string, opts: { historyAfter: number; run: number; limit: number; maxChars: number }) { return inspection.instanceInspection(this, instanceId, opts); }
  channelOverview(limit: number) { return inspection.channelOverview(this, limit); }
  receivedEvents(limit: number, before?: { receivedAt: string; source: string; id: string }) { return inspection.receivedEvents(this, limit, before); }
  channelDetail(channel: string, limits: { subscribers: number; pending: number }) { return inspection.channelDetail(this, channel, limits); }
  /** Throws when the database cannot be read. */
  checkReadable(): Promise<void> { return inspection.checkReadable(this); }
  /** Throws when the database cannot be written (a system-lock row, taken and released). */
  checkWritable(lock: string): Promise<void> { return inspection.checkWritable(this, lock, this.workerId); }
  /** Leases that expired untaken: their engine died or stalled; the sweep's stale-lease task retakes them. */
  expiredLeases() { return inspection.expiredLeases(this); }
  /** When a sweep task last ran against this database (null: never). */
  lastSweepAt() { return inspection.lastSweepAt(this); }
  /** Refuse a viewer session from now until `expiresAt` (logout). */
  revokeViewerSession(sessionId: string, expiresAt: Date): Promise<void> { return inspection.revokeViewerSession(this, sessionId, expiresAt); }
  viewerSessionRevoked(sessionId: string): Promise<boolean> { return inspection.viewerSessionRevoked(this, sessionId); }
  /** Store validated CloudEvents in one transaction (ingestion.ts). */
  ingestEvents(prepared: PreparedEvent[], scope?: DispatchScope): Promise<IngestResult[]> { return ingest(this, prepared, scope); }
  /** A POST to a per-wait URL (`createWebhook`), by its token's hash: fires the hook once; a waiting instance runs after the commit. */
  deliverToWebhook(tokenHash: string, headers: Headers, body: unknown, scope?: DispatchScope): Promise<WebhookFire> {
    return deliverToWebhook(this, tokenHash, deliveryOf(headers, body), scope);
  }

  // --- repairs: rerun, fork, bulk actions, schedule control (repairs.ts, bulk.ts, schedules.ts) ---
  /** Rerun a finished instance (its input, or `input.value`); idempotent per `requestId`. */
  rerun(instanceId: string, opts: { requestId?: string; input?: { value: unknown } } = {}, scope?: DispatchScope): Promise<Repaired> {
    return this.storage.transaction((tx) => rerunIn(this, tx, instanceId, opts, scope));
  }
  /** Fork an instance from one of its activities: the history before it is reused, the rest runs with the deployed code. */
  fork(instanceId: string, opts: { fromActivityId: string; requestId?: string }, scope?: DispatchScope): Promise<Forked> {
    return fork(this, instanceId, opts, scope);
  }
  /** How many instances a bulk filter matches now (a dry run). */
  countMatching(filter: BulkFilter): Promise<number> { return countMatching(this, filter); }
  /** Create a bulk operation (or find its request id's) and drive it in this invocation's background work. */
  async startBulk(req: BulkRequest, opts: { budgetMs?: number; batchSize?: number } = {}, scope?: DispatchScope): Promise<{ operation: BulkOperationRecord; created: boolean }> {
    const r = await createBulk(this, req);
    if (r.operation.status === "running") driveInBackground(this, r.operation.operationId, opts, scope);
    return r;
  }
  /** Run a bulk operation's batches now, until it finishes, another worker holds it or the budget is spent. */
  driveBulk(operationId: string, opts: { budgetMs?: number; batchSize?: number } = {}, scope?: DispatchScope): Promise<number> { return driveBulk(this, operationId, opts, scope); }
  bulkOperation(operationId: string): Promise<BulkOperationRecord | null> { return this.storage.getBulkOperation(operationId); }
  listBulkOperations(limit: number): Promise<BulkOperationRecord[]> { return this.storage.listBulkOperations(limit); }
  pauseSchedule(workflowName: string): Promise<ScheduleRecord> { return pauseSchedule(this, workflowName); }
  resumeSchedule(workflowName: string): Promise<ScheduleRecord> { return resumeSchedule(this, workflowName); }
  /** Start one instance of a scheduled workflow now (idempotent per `requestId`). */
  triggerSchedule(workflowName: string, requestId?: string, scope?: DispatchScope) { return triggerSchedule(this, workflowName, requestId, scope); }
  listSchedules(): Promise<ScheduleRecord[]> { return listAppSchedules(this); }

  async fireDueTimers(scope?: DispatchScope): Promise<number> {
    let fired = 0;
    const iso: Isolation = { storage: this.storage, maxFailures: this.quarantineAfter, failures: [], failedIds: new Set() };
    // Bounded rounds: whatever is left after them waits for the sweeper.
    for (let round = 0; round < 20; round++) {
      let full = false;
      const runnable = new Set<string>();
      // The sweep's own path for every wait kind that comes due (wait-kinds.ts).
      for (const expiry of EXPIRIES) {
        const ids = await expireDue(iso, expiry, 500);
        for (const id of ids) runnable.add(id);
        fired += ids.length;
        full ||= ids.length >= 500;
      }
      for (const instanceId of runnable) this.dispatcher.dispatch({ instanceId }, scope);
      const deadlines = await expireDeadlines(this, 100, scope);
      fired += deadlines;
      if (!full && deadlines < 100) break;
    }
    // Wake-ups for rate windows and debounce periods come through here too (flow-control.ts).
    fired += await startTimedStarts(this, 100, scope).catch((err: unknown) => (console.error("edda: timed starts failed (the sweeper will)", err), 0));
    return fired;
  }

  /** Post-commit: a message was published on `channel`; deliver it to waiting subscribers. */
  notifyPublished(channel: string, scope?: DispatchScope): void {
    notifyPublished(this, channel, scope);
  }

  /** Post-commit: outbox rows were committed; relay them now rather than at the next sweep. */
  notifyOutbox(eventIds: string[], scope?: DispatchScope): void {
    notifyOutbox(this, eventIds, scope);
  }

  sweep(opts?: SweepOptions, scope?: DispatchScope): Promise<SweepReport> {
    return sweep(this, opts, scope);
  }

  /** Sample the metrics gauges now (a scrape asks before it collects); nothing without metrics. */
  async sampleMetrics(): Promise<void> {
    await this.metrics?.sampleGauges(this.storage, [...this.workflows.keys()]);
  }

}

/**
 * The engine's view of a shared dispatcher: every dispatch names this engine
 * as its runner, so engines built per request never take each other's steps
 * (nor use each other's closed databases).
 */
function dispatchingAs(d: Dispatcher, runner: StepRunner): Dispatcher {
  const as = (scope?: DispatchScope): DispatchScope => (scope?.runner === runner ? scope : { ...scope, runner });
  return {
    attach: () => {},
    dispatch: (req, scope) => d.dispatch(req, as(scope)),
    ...(d.wakeIn ? { wakeIn: (s: number, scope?: DispatchScope) => d.wakeIn!(s, as(scope)) } : {}),
    ...(d.close ? { close: () => d.close!() } : {}),
  };
}
