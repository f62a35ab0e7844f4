/**
 * `edda-edge/testing`: a workflow test kit on the product's own engine,
 * storage and SQL — in-memory PGlite by default, or a Postgres database —
 * with time the test controls. `advance("7d")` makes everything due in those
 * seven days happen in order, without waiting (clock.ts, docs/design.md
 * "Test time"). Every driving call returns once the instances it touched
 * have run as far as they can at the current test time.
 */
import type { Workflow, WorkflowOutput } from "../core/definitions.ts";
import type { ActivityFn } from "../core/activity.ts";
import { INGESTION_LIMITS, fromJsonFormat } from "../core/cloudevent.ts";
import { ActivityRegistry } from "../core/registry.ts";
import type { RetryPolicy } from "../core/retry.ts";
import type { ErrorClass } from "../core/serialization.ts";
import { Engine, type InstanceDetail, type InstanceView, type RetentionOptions, type StartOptions, type WhyView } from "../engine/engine.ts";
import type { HistoryEntry } from "../engine/views.ts";
import type { IngestResult } from "../engine/ingestion.ts";
import { ingestCloudEvents } from "../http/cloudevents.ts";
import type { Database } from "../storage/database.ts";
import { migrate } from "../storage/migrate.ts";
import { createStorage } from "../storage/pg-storage.ts";
import type { InstanceStatus, ListInstancesQuery, WebhookGoneReason } from "../storage/types.ts";
import { WEBHOOK_PATH_PREFIX, WEBHOOK_TOKEN, webhookTokenHash } from "../core/webhook-waits.ts";
import { CLOCK_SEARCH_PATH, FIRED_BY_TIMERS, nextDue, TestClock } from "./clock.ts";
import { spanSeconds, type Span } from "./duration.ts";
import { recordHistory, verifyHistories, type RecordedHistory, type ReplayReport } from "./histories.ts";
import { StepQueue } from "./queue.ts";

export type { Span } from "./duration.ts";
export type { WebhookGoneReason } from "../storage/types.ts";
export type { IngestResult } from "../engine/ingestion.ts";
export type { RecordedEvent, RecordedHistory, ReplayCheck, ReplayReport } from "./histories.ts";

export interface TestEddaOptions<W extends Workflow> {
  workflows: readonly W[];
  /**
   * A Postgres URL of a database the kit may own for the test (it is
   * migrated and gets the test clock's schema); default: in-memory PGlite.
   */
  database?: string;
  /** Test time at the start (default: the current time, to the second). */
  startAt?: Date | string;
  retryPolicy?: RetryPolicy;
  errorClasses?: ErrorClass[];
  /** What the sweeper deletes (default: nothing within a test's span, a hundred years each). */
  retention?: RetentionOptions;
  /** Steps one `runUntilIdle` may run before it fails as a workflow that never waits (default 10 000). */
  maxSteps?: number;
}

/** What `start` returns: the instance id, typed with the workflow's output for `result`. */
export interface Started<O = unknown> {
  instanceId: string;
  readonly __output?: O;
}

/** The instance view (`status`, `output`, `error` …), its output typed by the workflow. */
export type TestResult<O = unknown> = Omit<InstanceView, "output"> & { output: O | null };

/** The input a caller passes to start `W` (before its schema's defaults and transforms). */
export type WorkflowStartInput<W> = W extends Workflow<any, any, any, infer In> ? In : never;
/** The workflow among `W` named `N`. */
export type NamedWorkflow<W extends Workflow, N> = Extract<W, { workflowName: N }>;
/** An instance: its id, or what `start` returned. */
export type InstanceRef = string | Started<unknown>;

/** A CloudEvent to ingest: `type` at least; `id` and `source` default to fresh values. */
export interface TestCloudEvent {
  type: string;
  id?: string;
  source?: string;
  data?: unknown;
  /** Deliver only to this instance (the `eddainstanceid` extension). */
  eddainstanceid?: string;
  [attribute: string]: unknown;
}

/** What a POST to a per-wait URL got. */
export type WebhookCall = { status: 202 } | { status: 410; reason: WebhookGoneReason } | { status: 404 };

export interface TestEdda<W extends Workflow = Workflow> {
  /** The current test time. */
  readonly now: Date;
  /** Move test time on by `span` (seconds, or "7d", "1h30m" …), running everything due on the way, earliest first. */
  advance(span: Span): Promise<void>;
  /** Run dispatched steps and what the sweep finds due now, until nothing is left to do at this instant. */
  runUntilIdle(): Promise<void>;
  start<K extends W>(workflow: K, input: WorkflowStartInput<K>, opts?: StartOptions): Promise<Started<WorkflowOutput<K>>>;
  start<N extends W["workflowName"]>(workflowName: N, input: WorkflowStartInput<NamedWorkflow<W, N>>, opts?: StartOptions): Promise<Started<WorkflowOutput<NamedWorkflow<W, N>>>>;
  /** A message on `channel` for one instance (as `POST /instances/:id/messages`); returns its message id. */
  send(instance: InstanceRef, channel: string, data?: unknown, metadata?: Record<string, unknown>): Promise<string>;
  /** A message on `channel` for its subscribers (as `POST /channels/:channel/messages`). */
  publish(channel: string, data?: unknown, metadata?: Record<string, unknown>): Promise<string>;
  /** A CloudEvent, ingested as `POST /events` does (dedupe, channel message, event-handler start). */
  event(event: TestCloudEvent): Promise<IngestResult>;
  /**
   * A POST to a per-wait URL a workflow made (`createWebhook`; catch the link with `replaceActivity` on the
   * activity that sends it), as `POST /hooks/:token` takes it: `body` is what `hook.wait()` gets (JSON,
   * `content-type: application/json` unless `headers` say otherwise). 202, 410 with the reason, or 404.
   */
  callWebhook(url: string, body?: unknown, headers?: Record<string, string>): Promise<WebhookCall>;
  cancel(instance: InstanceRef, cancelledBy?: string): Promise<{ status: InstanceStatus }>;
  /** The instance and its children, or null. */
  instance(instance: InstanceRef): Promise<InstanceDetail | null>;
  /** Why the instance is not moving and what will move it, as `GET /instances/:id/why` answers (throws for an unknown instance). */
  why(instance: InstanceRef): Promise<WhyView>;
  /** Instances, newest first, all pages (filters as `GET /instances`). */
  instances(query?: Omit<ListInstancesQuery, "cursor" | "limit">): Promise<InstanceView[]>;
  /** Its whole history (current run), in order. */
  history(instance: InstanceRef): Promise<HistoryEntry[]>;
  /** The instance view with its typed output; throws when the instance does not exist. */
  result<O>(instance: Started<O>): Promise<TestResult<O>>;
  result(instance: string): Promise<TestResult>;
  /**
   * Run `fn` instead of the activity (a test double of a side effect): the
   * engine still runs it as that activity — attempts, retries, timeouts, and
   * its result recorded in history under the activity's name.
   */
  replaceActivity<A extends unknown[], R>(activity: { readonly activityName: string; readonly fn: ActivityFn<A, R> } | string, fn: ActivityFn<A, R>): void;
  /** The instance's recorded history as JSON, for a folder of histories `verifyReplay` checks in CI. */
  capture(instance: InstanceRef): Promise<RecordedHistory>;
  /** Replay recorded histories against the kit's workflows (the `edda-edge verify-replay` check). */
  verifyReplay(histories: readonly RecordedHistory[]): Promise<ReplayReport>;
  close(): Promise<void>;
}

const HUNDRED_YEARS = 100 * 365 * 86_400;
const idOf = (ref: InstanceRef) => (typeof ref === "string" ? ref : ref.instanceId);

/**
 * The migrated PGlite every kit of this process starts from: initdb and the
 * migrations run once, and each kit opens a copy of the dump (several times
 * faster than a fresh cluster). Built on first use; a failure is retried by
 * the next kit.
 */
let template: Promise<Blob> | null = null;

async function pgliteTemplate(): Promise<Blob> {
  const { PGlite } = await import("@electric-sql/pglite");
  const { drizzle } = await import("drizzle-orm/pglite");
  const client = new PGlite();
  try {
    await client.waitReady;
    const db = drizzle({ client }) as unknown as Database["db"];
    await db.execute(`SET search_path = ${CLOCK_SEARCH_PATH}`);
    // Column defaults (`now()`) bind to the clock's functions when the tables are created.
    await new TestClock(db, Date.now() * 1000).install();
    await migrate(db);
    return await client.dumpDataDir("none");
  } finally {
    await client.close();
  }
}

async function openDatabase(url: string | undefined): Promise<Database> {
  if (url === undefined) {
    const { createPgliteDatabase } = await import("../storage/drivers/pglite.ts");
    template ??= pgliteTemplate().catch((err: unknown) => {
      template = null;
      throw err;
    });
    const database = await createPgliteDatabase({ loadDataDir: await template });
    // One connection: a session setting holds for every statement the kit runs.
    await database.db.execute(`SET search_path = ${CLOCK_SEARCH_PATH}`);
    return database;
  }
  const { createPostgresJsDatabase } = await import("../storage/drivers/postgres-js.ts");
  // A start-up parameter, so each pooled connection has it from its first statement.
  const u = new URL(url);
  u.searchParams.set("search_path", CLOCK_SEARCH_PATH);
  return createPostgresJsDatabase({ url: u.toString(), max: 4 });
}

/**
 * The `edda-edge verify-replay` check without a database: replay recorded
 * histories (from `t.capture`, kept as JSON files) against these workflows,
 * e.g. in CI before a deploy. Diverging histories are listed with the reason.
 */
export function verifyReplay(opts: { workflows: readonly Workflow[]; histories: readonly RecordedHistory[]; errorClasses?: ErrorClass[] }): Promise<ReplayReport> {
  const workflows = new Map(opts.workflows.map((w) => [w.workflowName, w]));
  const errorClasses = Object.fromEntries((opts.errorClasses ?? []).map((C) => [new C("").name, C]));
  return verifyHistories(workflows, opts.histories, errorClasses);
}

export async function createTestEdda<const W extends Workflow>(opts: TestEddaOptions<W>): Promise<TestEdda<W>> {
  const startAt = opts.startAt === undefined ? new Date(Math.floor(Date.now() / 1000) * 1000) : new Date(opts.startAt);
  if (Number.isNaN(startAt.getTime())) throw new TypeError(`createTestEdda: startAt is not a date: ${String(opts.startAt)}`);
  const database = await openDatabase(opts.database);
  const clock = new TestClock(database.db, startAt.getTime() * 1000);
  try {
    await clock.install();
    if (!(await clock.inUse())) throw new Error("createTestEdda: the database does not read the test clock (its search_path was not applied)");
    await migrate(database.db);
  } catch (err) {
    await database.close();
    throw err;
  }
  const queue = new StepQueue(() => clock.tick());
  const activities = new ActivityRegistry();
  const engine = new Engine({
    storage: createStorage(database),
    workflows: [...opts.workflows],
    activities,
    dispatcher: queue,
    serviceName: "edda-test",
    clock: clock.millis,
    retention: { finishedInstancesSeconds: HUNDRED_YEARS, channelMessagesSeconds: HUNDRED_YEARS, cloudEventDedupeSeconds: HUNDRED_YEARS, ...opts.retention },
    ...(opts.retryPolicy ? { retryPolicy: opts.retryPolicy } : {}),
    ...(opts.errorClasses ? { errorClasses: opts.errorClasses } : {}),
    // Per-wait URLs need a key to derive their tokens from: one of the kit's own (the URLs are paths).
    webhookLinks: { key: `edda-test-kit-${crypto.randomUUID()}` },
  });
  const maxSteps = opts.maxSteps ?? 10_000;

  /** Steps, then a full sweep, until the sweep finds nothing more at this instant. */
  async function runUntilIdle(): Promise<void> {
    for (let round = 0; ; round++) {
      await queue.drain(maxSteps);
      await clock.tick();
      const report = await engine.sweep({ budgetMs: 600_000 }, queue.scope);
      if (report.failures.length) throw new Error(`sweep failed: ${report.failures.map((f) => `${f.task}: ${f.errorType}: ${f.message}`).join("; ")}`);
      if (queue.size === 0) return;
      if (round >= maxSteps) throw new Error(`runUntilIdle: the sweep kept finding work after ${round} rounds`);
    }
  }

  /**
   * Only timers and receive timeouts are due: firing them (three statements)
   * does what the sweep would, so a month of daily timers is not thirty full
   * sweeps. Loops, as a step may set a timer due at once (a zero delay).
   */
  async function fireUntilIdle(): Promise<void> {
    for (let round = 0; ; round++) {
      await queue.drain(maxSteps);
      await clock.tick();
      const fired = await engine.fireDueTimers(queue.scope);
      if (fired === 0 && queue.size === 0) return;
      if (round >= maxSteps) throw new Error(`advance: timers kept coming due at ${new Date(clock.millis()).toISOString()} after ${round} rounds`);
    }
  }

  async function advance(span: Span): Promise<void> {
    const target = clock.micros + Math.round(spanSeconds(span) * 1_000_000);
    // Through the end of the target's millisecond: the clock's microsecond ticks
    // (one per step) order rows below what test time shows, so a wait set a few
    // steps into a day still ends within "30d" of the start, as a test means it.
    const through = target - (target % 1000) + 999;
    await runUntilIdle();
    const due = () => nextDue(database.db, engine.workflows.values(), clock.micros, through);
    for (let next = await due(); next; next = await due()) {
      await clock.set(next.atUs);
      if ([...next.kinds].every((k) => FIRED_BY_TIMERS.has(k))) await fireUntilIdle();
      else await runUntilIdle();
    }
    if (clock.micros < target) await clock.set(target);
    // Whatever else the sweep does at the end of the span (retention, stale deliveries).
    await runUntilIdle();
  }

  const driven = async <T>(fn: () => Promise<T>): Promise<T> => {
    await clock.tick();
    const r = await fn();
    await runUntilIdle();
    return r;
  };

  async function view(ref: InstanceRef): Promise<TestResult> {
    const v = await engine.getInstance(idOf(ref));
    if (!v) throw new Error(`no instance "${idOf(ref)}"`);
    const { children: _children, history: _history, historyNextCursor: _next, why: _why, ...rest } = v;
    return rest;
  }

  const kit: TestEdda<W> = {
    get now() {
      return new Date(clock.millis());
    },
    advance,
    runUntilIdle,
    start: ((wf: Workflow | string, input: unknown, o?: StartOptions) => driven(async () => ({ instanceId: (await engine.start(wf, input, o, queue.scope)).instanceId }))) as TestEdda<W>["start"],
    send: (ref, channel, data = null, metadata) => driven(() => engine.publish(channel, data, { targetInstanceId: idOf(ref), ...(metadata ? { metadata } : {}) }, queue.scope)),
    publish: (channel, data = null, metadata) => driven(() => engine.publish(channel, data, metadata ? { metadata } : {}, queue.scope)),
    event: (e) =>
      driven(async () => {
        const record = fromJsonFormat({ specversion: "1.0", id: crypto.randomUUID(), source: "/edda-edge/testing", ...e }, INGESTION_LIMITS);
        const [r] = await ingestCloudEvents(engine, [record], queue.scope);
        return r!;
      }),
    callWebhook: (url, body = null, headers = {}) =>
      driven(async (): Promise<WebhookCall> => {
        const path = new URL(url, "http://edda-test-kit").pathname;
        const token = path.startsWith(WEBHOOK_PATH_PREFIX) ? path.slice(WEBHOOK_PATH_PREFIX.length) : "";
        if (!WEBHOOK_TOKEN.test(token)) return { status: 404 };
        const h = new Headers({ "content-type": "application/json", ...headers });
        const r = await engine.deliverToWebhook(await webhookTokenHash(token), h, body, queue.scope);
        return r.kind === "fired" ? { status: 202 } : r.kind === "gone" ? { status: 410, reason: r.reason } : { status: 404 };
      }),
    cancel: (ref, by = "test") => driven(() => engine.cancel(idOf(ref), by, queue.scope)),
    instance: (ref) => engine.getInstance(idOf(ref)),
    async why(ref) {
      const w = await engine.why(idOf(ref));
      if (!w) throw new Error(`no instance "${idOf(ref)}"`);
      return w;
    },
    async instances(query = {}) {
      const out: InstanceView[] = [];
      let cursor: string | null = null;
      do {
        const page: { instances: InstanceView[]; nextCursor: string | null } = await engine.findInstances({ ...query, limit: 500, ...(cursor ? { cursor } : {}) });
        out.push(...page.instances);
        cursor = page.nextCursor;
      } while (cursor);
      return out;
    },
    async history(ref) {
      const out: HistoryEntry[] = [];
      let after: string | undefined;
      do {
        const page = await engine.historyPage(idOf(ref), { limit: 500, ...(after ? { after } : {}) });
        out.push(...page.history);
        after = page.nextCursor ?? undefined;
      } while (after);
      return out;
    },
    result: view as TestEdda<W>["result"],
    replaceActivity(activity, fn) {
      activities.replace(typeof activity === "string" ? activity : activity.activityName, fn as ActivityFn<unknown[], unknown>);
    },
    async capture(ref) {
      const inst = await engine.instanceRecord(idOf(ref));
      if (!inst) throw new Error(`no instance "${idOf(ref)}"`);
      return recordHistory(inst, await engine.historyEvents(inst.instanceId));
    },
    verifyReplay: (histories) => verifyHistories(engine.workflows, histories, engine.errorClasses),
    async close() {
      await queue.close();
      await database.close();
    },
  };
  return kit;
}
