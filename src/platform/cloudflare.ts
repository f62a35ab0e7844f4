/**
 * Cloudflare Workers adapter: `createWorker({ workflows })` is the module
 * worker — `fetch` serves the app, `queue` runs follow-up steps, `scheduled`
 * (the cron trigger) sweeps.
 *
 * Database clients live for one invocation (Workers forbid sharing I/O
 * objects across requests): each opens one (postgres.js over TCP with
 * `nodejs_compat`, through Hyperdrive when bound, or Neon's WebSocket driver)
 * and closes it once its background work is done. postgres.js is the
 * default; Neon's driver is bundled only when the Worker imports it
 * (`driver: neonServerless` from `edda-edge/drivers/neon-serverless`), since
 * a bundler cannot drop a driver chosen at run time. Nothing is migrated
 * here (the migrator is not in a Worker's bundle); run `edda-edge migrate`
 * against the deployed database. The viewer at /ui is off unless the Worker
 * passes `viewer: viewer()` from `edda-edge/viewer`, for the same reason as
 * `mcp()`: what is not imported is not bundled.
 *
 * Follow-up transport, the first available:
 * 1. `EDDA_QUEUE` (a Queues producer bound to a queue this worker consumes):
 *    every follow-up is a message run by a top-level `queue()` invocation;
 *    short timers are delayed messages.
 * 2. A signed request to this same worker, acknowledged at once, through a
 *    `SELF` service binding, EDDA_PUBLIC_URL, the `ctx.exports` loopback or
 *    the request's own origin — bounded by EDDA_MAX_HOPS (default
 *    WORKERS_MAX_HOPS: Workers refuse a chain of 16) and left to the cron
 *    sweep beyond it. With EDDA_DISPATCHER=http and `EDDA_QUEUE` both set,
 *    follow-ups are fetches (no queue batching delay) and a chain at the
 *    bound goes on through the queue (a top-level invocation) instead.
 * Every invocation has one subrequest budget (EDDA_SUBREQUEST_LIMIT, 40 by
 * default: the Free plan allows 50).
 */
import { isWorkerVersionId, workersFollowUpHeaders } from "../engine/deployment-routing.ts";
import { createEddaSharingApp, runInvocation, type Edda, type EddaOptions, type SharedApp } from "../edda.ts";
import { SubrequestBudget, type Dispatcher } from "../engine/dispatcher.ts";
import { HttpDispatcher } from "../engine/http-dispatcher.ts";
import { consumeBatch, QueueDispatcher, type FollowUpQueue, type OutgoingMessage } from "../engine/queue-dispatcher.ts";
import { rotationTurn } from "../engine/sweep-rotation.ts";
import type { SweepTask } from "../engine/sweeper.ts";
import { configurationProblem } from "../http/problem.ts";
import type { DatabaseDriver } from "../storage/database.ts";
import { postgresJs } from "../storage/drivers/postgres-js.ts";
import { r2Values, type R2BucketLike } from "../storage/r2-values.ts";
import { readConfig, unauthenticatedRefusal, withEnvironment, type EddaConfig, type EddaEnv } from "./env.ts";
import { chooseDriver, ConfigurationError, openServerlessDatabase } from "./serverless.ts";

/** The parts of the Workers runtime types this adapter uses (no @cloudflare/workers-types). */
export type { EddaConfig, EddaEnv } from "./env.ts";
export { r2Values, type R2BucketLike } from "../storage/r2-values.ts";

export interface Fetcher {
  fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response>;
}
export interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
  readonly exports?: { default?: Fetcher };
}
export interface ScheduledController {
  readonly cron: string;
  readonly scheduledTime: number;
}
/** A Queues producer binding. */
export interface Queue {
  send(body: unknown, options?: { delaySeconds?: number; contentType?: "json" }): Promise<void>;
  sendBatch(messages: Iterable<{ body: unknown; delaySeconds?: number; contentType?: "json" }>): Promise<void>;
}
export interface QueueMessage {
  readonly id: string;
  readonly body: unknown;
  readonly attempts: number;
  ack(): void;
  retry(options?: { delaySeconds?: number }): void;
}
export interface MessageBatch {
  readonly queue: string;
  readonly messages: readonly QueueMessage[];
}
export interface WorkerEnv extends EddaEnv {
  /** Optional Hyperdrive binding: its connection string replaces DATABASE_URL. */
  HYPERDRIVE?: { connectionString: string };
  /** Optional service binding to this worker itself, for follow-ups. */
  SELF?: Fetcher;
  /** Optional Queues producer for follow-ups; this worker must consume that queue. */
  EDDA_QUEUE?: Queue;
  /** Optional R2 bucket: values by reference (over the large-value threshold) are kept there instead of in `workflow_payloads`. */
  EDDA_VALUES?: R2BucketLike;
  /** Optional version metadata binding (`version_metadata = { binding = "CF_VERSION_METADATA" }`): its id names this deployment when EDDA_DEPLOYMENT is unset. */
  CF_VERSION_METADATA?: { id: string; tag?: string; timestamp?: string };
  /**
   * The Worker's name (wrangler's `name`): with the version metadata binding, each fetch follow-up carries
   * `Cloudflare-Workers-Version-Overrides` naming this version, so during a gradual deployment a step's
   * follow-up runs on the code that ran the step (engine/deployment-routing.ts).
   */
  EDDA_WORKER_NAME?: string;
}

/**
 * Outgoing fetches per invocation by default: the Free plan allows 50
 * subrequests per request; 10 are left for the database connections and the
 * application's own fetches. Paid plans raise it with EDDA_SUBREQUEST_LIMIT.
 */
export const WORKERS_SUBREQUEST_BUDGET = 40;

/**
 * CPU budget of one cron sweep by default (ms): the Free plan's CPU limit per
 * invocation (developers.cloudflare.com/workers/platform/limits). Paid plans
 * may set EDDA_SWEEP_CPU_MS higher, or 0 for no budget.
 */
export const WORKERS_FREE_SWEEP_CPU_MS = 10;

/**
 * The sweep's CPU estimate per statement (ms), since an isolate cannot read
 * its own CPU time (and its clock stands still between I/O): an idle sweep's
 * engine CPU over its statements, measured by bench/sweep-cost.ts.
 */
export const SWEEP_STATEMENT_CPU_MS = 0.6;
/**
 * Fetch follow-ups a chain may take on Workers: "A Worker cannot call itself or another Worker more
 * than 16 times" (error 1019, developers.cloudflare.com/workers/observability/errors/#loop-limit);
 * half of it leaves room for the Workers in front of this one.
 */
export const WORKERS_MAX_HOPS = 8;

/** Queues limits: 100 messages per sendBatch, delaySeconds up to 24 h. */
const QUEUES_MAX_BATCH = 100;
const QUEUES_MAX_DELAY_SECONDS = 24 * 3600;
/**
 * Messages of one batch run at once: all of them (Queues hand at most 100 to one invocation). Their
 * statements queue on the invocation's 5 connections, the handed-off reads of a turn go as one
 * statement (group-load.ts) and the steps that conclude in the same turn as one group-commit
 * statement (group-commit.ts). Chained steps join them, up to the same number at once.
 */
const BATCH_CONCURRENCY = QUEUES_MAX_BATCH;

/**
 * A consumer invocation's CPU budget by default (ms), the steps it chains held to it by estimate:
 * the Free plan's CPU limit per invocation, which queue consumers share ("Queue consumer Workers …
 * share the same per invocation CPU limits as any Workers do", developers.cloudflare.com/queues/platform/limits/).
 * Paid plans allow 30 s by default (up to 5 min with `limits.cpu_ms`): set EDDA_CONSUMER_CPU_MS to it.
 */
export const WORKERS_FREE_CONSUMER_CPU_MS = 10;
/**
 * The chain's CPU estimate per step (ms): an isolate cannot read its own CPU time. About what a cold
 * queue step costs in bench/ (`queue_cpu_ms_per_step`, this process's CPU, the starts' included); a
 * chained step is warm (its run kept in memory) and costs less.
 */
export const QUEUE_STEP_CPU_MS = 0.5;
/**
 * No chained step starts once the invocation is this old (ms). Consumers may run 15 minutes of wall
 * time (Queues limits); a short invocation lets Queues scale consumers on the backlog after each batch,
 * and an invocation that dies loses little (its chained steps resume when their handed leases expire).
 */
export const QUEUE_CHAIN_WALL_MS = 30_000;

/**
 * The CPU time a Worker invocation may spend on the Workers Free plan (10 ms; a paid plan's default is 30 s,
 * up to 5 min with `limits.cpu_ms`: docs/design.md, Cold replay and the CPU budget). A Worker cannot tell
 * its plan: the smallest is the default `why` warns against, EDDA_CPU_BUDGET_MS sets a paid plan's.
 */
const WORKERS_FREE_CPU_MS = 10;

/** The shortest interval of a Workers cron trigger (one minute), the sweep cadence `why` expects by default. */
const WORKERS_CRON_SECONDS = 60;

export type WorkerOptions = Omit<EddaOptions, "database" | "dispatcher" | "secret" | "apiToken" | "brokerUrl"> & {
  /**
   * The driver(s) this Worker bundles (default `postgresJs`); with several,
   * DATABASE_DRIVER picks one by name, else the first. Naming a driver the
   * Worker was not given is a configuration error, not a silent fallback.
   */
  driver?: DatabaseDriver | readonly DatabaseDriver[];
};

export interface EddaWorker {
  fetch(request: Request, env: WorkerEnv, ctx: ExecutionContext): Promise<Response>;
  queue(batch: MessageBatch, env: WorkerEnv, ctx: ExecutionContext): Promise<void>;
  scheduled(controller: ScheduledController, env: WorkerEnv, ctx: ExecutionContext): Promise<void>;
}

/** What this isolate ran since it started, by invocation kind (`GET /_edda/invocations`). */
export interface InvocationCounts {
  requests: number;
  /** `POST /_edda/step` requests: follow-ups that arrived as nested fetches. */
  fetchFollowUps: number;
  queueBatches: number;
  queueMessages: number;
  /** Step follow-ups consumer invocations ran themselves (chained) instead of sending them as messages. */
  queueChainedSteps: number;
  /** The most work items (messages and chained steps) one consumer invocation ran. */
  maxQueueBatchSteps: number;
  scheduled: number;
  /**
   * The most subrequests the engine made in one invocation of each kind:
   * queue `send`/`sendBatch` calls, follow-up fetches and outbox POSTs,
   * counted where they leave (the bindings and the fetch), so a test can hold
   * them against the platform's limit, which `wrangler dev` does not enforce.
   */
  maxSubrequests: { request: number; queueBatch: number; scheduled: number };
  /** The last cron sweep: its rotation turn, what it cost by the budget's estimate, and what it left for later. */
  lastSweep: SweepRecord | null;
}

export interface SweepRecord {
  /** The cron tick's time (`controller.scheduledTime`), whose minute is the rotation's turn. */
  scheduledTime: number;
  rotationTurn: number;
  /** 0: no budget. */
  cpuBudgetMs: number;
  /** Statements the invocation issued, and the CPU estimate the budget was held to (statements × SWEEP_STATEMENT_CPU_MS). */
  statements: number;
  cpuEstimateMs: number;
  deferred: SweepTask[];
  skipped: SweepTask[];
  timersFired: number;
  failures: number;
}

type InvocationKind = keyof InvocationCounts["maxSubrequests"];

export function createWorker(workerOptions: WorkerOptions): EddaWorker {
  const { driver, ...opts } = workerOptions;
  const drivers = [driver ?? postgresJs].flat();
  const counts: InvocationCounts = { requests: 0, fetchFollowUps: 0, queueBatches: 0, queueMessages: 0, queueChainedSteps: 0, maxQueueBatchSteps: 0, scheduled: 0, maxSubrequests: { request: 0, queueBatch: 0, scheduled: 0 }, lastSweep: null };
  /** A counter of one invocation's subrequests, folded into `counts.maxSubrequests` as it grows. */
  const tally = (kind: InvocationKind) => {
    let n = 0;
    return () => {
      n++;
      if (n > counts.maxSubrequests[kind]) counts.maxSubrequests[kind] = n;
    };
  };

  // One Edda per invocation (its dispatcher may use this invocation's loopback and counts its subrequests), but one app
  // per env object: building the routes and their schemas costs about 1 ms of CPU per invocation (bench/), and nothing
  // in them belongs to an invocation (the app asks the Edda serving the request for its engine and scope).
  const apps = new WeakMap<object, SharedApp>();
  const appFor = (env: WorkerEnv): SharedApp => {
    let shared = apps.get(env);
    if (!shared) apps.set(env, (shared = {}));
    return shared;
  };
  function eddaFor(env: WorkerEnv, ctx: ExecutionContext, origin: string | null, kind: InvocationKind): { edda: Edda; config: EddaConfig; subrequestLimit: number; statements: () => number } {
    const config = readConfig(env);
    // Explicit options win over the environment (env.ts withEnvironment), as on every platform.
    const version = env.CF_VERSION_METADATA?.id;
    // A cron trigger fires at most once a minute: the cadence a Worker's sweeps are held to (EDDA_SWEEP_EXPECTED_SECONDS for another).
    const options = withEnvironment(opts, config, { subrequestLimit: WORKERS_SUBREQUEST_BUDGET, sweepIntervalSeconds: WORKERS_CRON_SECONDS, cpuBudgetMs: WORKERS_FREE_CPU_MS, ...(version ? { deployment: version } : {}) });
    const { secret } = options;
    const subrequestLimit = options.subrequestLimit ?? WORKERS_SUBREQUEST_BUDGET;
    const count = tally(kind);
    const outboxFetch = opts.outbox?.fetch ?? fetch;
    if (!secret) throw new ConfigurationError("EDDA_SECRET is not set (it signs follow-up requests)", "EDDA_SECRET");
    // Checked here, not at the first statement: a DATABASE_DRIVER this Worker does not bundle is a configuration problem.
    const chosen = [chooseDriver(config, drivers)];
    // Statements this invocation issued: the sweep's CPU estimate (an isolate cannot read its own CPU time).
    let statements = () => 0;
    const edda = createEddaSharingApp({
      ...options,
      database: () => {
        const database = openServerlessDatabase(config, chosen, { ...(env.HYPERDRIVE ? { connectionString: env.HYPERDRIVE.connectionString } : {}), max: 5, perRequest: true });
        statements = () => database.stats.statements;
        return database;
      },
      secret,
      // An explicit store wins over the binding, as options win over the environment.
      ...(env.EDDA_VALUES && !options.largeValues?.store ? { largeValues: { ...options.largeValues, store: r2Values(env.EDDA_VALUES) } } : {}),
      outbox: {
        ...opts.outbox,
        fetch: (input, init) => {
          count();
          return outboxFetch(input, init);
        },
      },
      dispatcher: dispatcherFor(env, ctx, origin, config, secret, count),
      subrequestLimit,
      routes: (app) => {
        app.get("/_edda/invocations", (c) => c.json(counts));
        opts.routes?.(app);
      },
    }, appFor(env));
    return { edda, config, subrequestLimit, statements: () => statements() };
  }

  return {
    async fetch(request, env, ctx) {
      counts.requests++;
      if (request.method === "POST" && new URL(request.url).pathname === "/_edda/step") counts.fetchFollowUps++;
      let edda: Edda;
      try {
        // Secure by default: a Worker answers the internet, so no API without a token unless explicitly allowed.
        const refusal = unauthenticatedRefusal(readConfig(env));
        if (refusal) throw refusal;
        edda = eddaFor(env, ctx, new URL(request.url).origin, "request").edda;
      } catch (err) {
        if (err instanceof ConfigurationError) return configurationProblem(err, new URL(request.url).pathname);
        throw err;
      }
      return edda.fetch(request, env, ctx);
    },

    async queue(batch, env, ctx) {
      counts.queueBatches++;
      counts.queueMessages += batch.messages.length;
      const { edda, config, subrequestLimit } = eddaFor(env, ctx, null, "queueBatch");
      const budget = new SubrequestBudget(subrequestLimit);
      // The whole batch is one invocation: one database client, one budget; each message is acked once its work is done.
      // Its steps' step follow-ups run here too while the consumer's CPU budget (by estimate) and the chain's wall time allow.
      const cpuMs = config.consumerCpuMs ?? WORKERS_FREE_CONSUMER_CPU_MS;
      const report = await runInvocation(
        edda,
        (engine, scope) => consumeBatch(engine, edda.dispatcher, scope, batch.messages, { concurrency: BATCH_CONCURRENCY, chain: { cpuMs, stepCpuMs: QUEUE_STEP_CPU_MS, wallMs: QUEUE_CHAIN_WALL_MS } }),
        { budget, ctx },
      );
      counts.queueChainedSteps += report.chained;
      if (report.steps > counts.maxQueueBatchSteps) counts.maxQueueBatchSteps = report.steps;
    },

    async scheduled(controller, env, ctx) {
      counts.scheduled++;
      const { edda, config, statements } = eddaFor(env, ctx, null, "scheduled");
      // Workers Free allows 10 ms of CPU per invocation: the sweep rotates its tasks under that budget (EDDA_SWEEP_CPU_MS, 0 = none).
      const cpuBudgetMs = config.sweepCpuMs ?? WORKERS_FREE_SWEEP_CPU_MS;
      // The rotation turns with the cron tick's minute (not this isolate's clock), so each tick of a schedule leads with the next task.
      const turn = rotationTurn(controller.scheduledTime);
      const report = await edda.sweep(cpuBudgetMs > 0 ? { cpuBudgetMs, cpuClock: () => statements() * SWEEP_STATEMENT_CPU_MS, rotationTurn: turn } : {}, ctx);
      const n = statements();
      counts.lastSweep = {
        scheduledTime: controller.scheduledTime,
        rotationTurn: turn,
        cpuBudgetMs,
        statements: n,
        cpuEstimateMs: n * SWEEP_STATEMENT_CPU_MS,
        deferred: report.deferred,
        skipped: report.skipped,
        timersFired: report.timersFired,
        failures: report.failures.length,
      };
      console.log(`edda: sweep (${controller.cron})`, JSON.stringify(report));
    },
  };
}

function dispatcherFor(env: WorkerEnv, ctx: ExecutionContext, origin: string | null, config: EddaConfig, secret: string, count: () => void): Dispatcher {
  const queue = env.EDDA_QUEUE ? new QueueDispatcher(cloudflareQueue(env.EDDA_QUEUE, count)) : null;
  if (queue && !config.fetchDispatcher) return queue;
  const self = env.SELF ?? (config.publicUrl ? undefined : ctx.exports?.default);
  const baseUrl = config.publicUrl ?? origin ?? "https://edda.internal";
  if (!self && !config.publicUrl && !origin) console.warn("edda: no EDDA_QUEUE, EDDA_PUBLIC_URL, SELF binding or ctx.exports loopback: cron follow-ups cannot be sent");
  const pin = workersFollowUpHeaders(env.EDDA_WORKER_NAME, env.CF_VERSION_METADATA?.id ?? null, isWorkerVersionId);
  const pinned = Object.keys(pin).length > 0;
  return new HttpDispatcher({
    baseUrl,
    secret,
    fetch: (input, init) => {
      count();
      const sent = pinned ? { ...init, headers: { ...(init?.headers as Record<string, string> | undefined), ...pin } } : init;
      return self ? self.fetch(input, sent) : fetch(input, sent);
    },
    maxHops: config.maxHops ?? WORKERS_MAX_HOPS,
    ...(queue ? { continueWith: queue } : {}),
  });
}

function cloudflareQueue(q: Queue, count: () => void): FollowUpQueue {
  return {
    maxBatch: QUEUES_MAX_BATCH,
    maxDelaySeconds: QUEUES_MAX_DELAY_SECONDS,
    send: (messages: OutgoingMessage[]) => {
      count();
      return messages.length === 1
        ? q.send(messages[0]!.body, { contentType: "json", ...(messages[0]!.delaySeconds ? { delaySeconds: messages[0]!.delaySeconds } : {}) })
        : q.sendBatch(messages.map((m) => ({ body: m.body, contentType: "json" as const, ...(m.delaySeconds ? { delaySeconds: m.delaySeconds } : {}) })));
    },
  };
}
