/**
 * The sweeper: what the cron trigger runs. It finds the work no request is
 * carrying — timers and receive timeouts that came due, leases of workers that
 * died, instances whose follow-up was lost, waiters with a message they were
 * not woken for, outbox rows to relay, channel messages past retention — and
 * hands it to the dispatcher (the steps do the rest).
 *
 * Guarantees:
 * - Each task runs under its own `system_locks` lease, so of several sweeps at
 *   once (cron invocations on different isolates, a manual `/_edda/sweep`)
 *   only one runs a given task; the others skip it. The holder is unique per
 *   sweep call, so even two sweeps of one engine exclude each other. Inside,
 *   the storage statements claim rows with SKIP LOCKED and each batch is its
 *   own short transaction, so work is never done twice nor lost: a row is
 *   either claimed and completed by one batch, or left for the next sweep.
 * - A sweep stops starting batches (and tasks) after its time budget, so it
 *   fits a cron invocation's limits; what is left waits for the next one.
 * - Poison isolation: a task whose batch fails (for a reason that is not
 *   transient) runs the batch's rows one at a time; a row that fails is
 *   counted on its instance (`rowFailures` in the report) and, after
 *   `quarantineAfterFailures` failures in a row, set aside — quarantined, or
 *   for retention left out — so it never blocks the other rows, and one
 *   failing task never stops the others.
 * - Dispatching is idempotent (a step starts by taking the lease), so an
 *   instance found by two tasks of one sweep is dispatched once, and one found
 *   again by a later sweep while its step is in flight is skipped by the step.
 */
import type { ExpiryCounter, ExpiryTask } from "../core/model.ts";
import { deliverToWaitingSubscribers } from "./channels.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { expireDeadlines, unparkChanged } from "./lifecycle.ts";
import { runDueSchedules } from "./schedules.ts";
import { promoteAllQueued, startTimedStarts } from "./flow-control.ts";
import { emptyRelayReport, relayOutbox, type RelayReport } from "./outbox.ts";
import { batchOrEach, type Isolation, type RowFailure } from "./poison.ts";
import { mustRun, rotationTurn, sweepOrder } from "./sweep-rotation.ts";
import { EXPIRIES, expireDue } from "./wait-kinds.ts";
import { sweepBulk } from "./bulk.ts";

/** What a sweep uses: its own settings and what its tasks use. */
export type SweepDeps = Uses<"storage" | "dispatcher" | "workerId" | "quarantineAfter" | "retention" | "metrics" | "runs"> &
  Parameters<typeof expireDeadlines>[0] &
  Parameters<typeof deliverToWaitingSubscribers>[0] &
  Parameters<typeof unparkChanged>[0] &
  Parameters<typeof relayOutbox>[0] &
  Parameters<typeof runDueSchedules>[0] &
  Parameters<typeof promoteAllQueued>[0] &
  Parameters<typeof startTimedStarts>[0] &
  Parameters<typeof sweepBulk>[0];

export interface SweepOptions {
  /** Rows per batch (default 200). */
  batchSize?: number;
  /** Instances per batch of a bulk operation (default 25, bulk.ts). */
  bulkBatchSize?: number;
  /** Stop starting new batches after this long (default 20 s). */
  budgetMs?: number;
  /**
   * Re-dispatch runnable, unlocked instances only once they have been idle
   * this long (default 2 s): a fresh instance's own dispatch is usually still
   * in flight, and on Workers every needless follow-up is a subrequest.
   */
  resumeIdleSeconds?: number;
  /** Delete channel messages older than this (default: the engine's retention, 7 days). */
  messageRetentionSeconds?: number;
  /** Delete finished instances last updated longer ago than this (default: the engine's retention, 7 days). */
  instanceRetentionSeconds?: number;
  /** Delete CloudEvent dedupe rows older than this (default: the engine's retention, 7 days). */
  dedupeRetentionSeconds?: number;
  /**
   * Lease of a task's system lock (default 10 s), renewed between batches.
   * Short, because a sweep killed mid-task (crash, platform CPU limit) blocks
   * that task for other sweeps until its lock expires.
   */
  lockSeconds?: number;
  /**
   * CPU time one sweep may use, in ms (default: no budget). With one, due
   * timers, expired message waits and due schedule ticks run first, the other
   * tasks follow in an order that rotates every minute (sweep-rotation.ts),
   * and once the budget is spent no further task starts (nor a further
   * batch): the rest is `deferred` to a later sweep, and every task still
   * runs at least once every 11 minutes. Workers Free allows 10 ms of CPU per
   * cron invocation.
   */
  cpuBudgetMs?: number;
  /** CPU used so far in ms, read for the budget (default: `process.cpuUsage` where it exists, else elapsed time, an upper bound). */
  cpuClock?: () => number;
  /** The rotation's turn (default: the current minute). */
  rotationTurn?: number;
}

/**
 * Run first in a sweep with a CPU budget, whatever it costs: what is due at a
 * time — a sleeping workflow, a receive timeout, a schedule tick (whose
 * `missed: "skip"` grace is two minutes) — never waits for the rotation.
 */
// The wait kinds declare which of their expiries are such (core/model.ts WAIT_KINDS).
const PRIORITY_TASKS: ReadonlySet<SweepTask> = new Set<SweepTask>([...EXPIRIES.filter((e) => e.priority).map((e) => e.task), "schedules"]);

function defaultCpuClock(): () => number {
  const usage = (globalThis as { process?: { cpuUsage?: () => { user: number; system: number } } }).process?.cpuUsage;
  if (typeof usage === "function") {
    try {
      usage();
      return () => {
        const u = usage();
        return (u.user + u.system) / 1000;
      };
    } catch {
      // a polyfill that refuses (workerd's process): elapsed time below
    }
  }
  return () => performance.now();
}

/** The system lock of a sweep task; its `locked_at` says when the task last ran (GET /instances/:id/why). */
export const SWEEP_LOCK_PREFIX = "edda.sweep.";
/**
 * The resumable task takes only the instances its deployment may run (versioning.ts), so each deployment has
 * its own: a newer deployment's sweeps must not keep an older one's from its instances.
 */
export const sweepLock = (task: SweepTask, deployment?: string): string => `${SWEEP_LOCK_PREFIX}${task}${task === "resumable" && deployment !== undefined ? `@${deployment}` : ""}`;

/** A sweep's tasks: one per wait kind that comes due by itself (core/model.ts), then the others. */
export type SweepTask =
  | ExpiryTask
  | "deadlines"
  | "stale_leases"
  | "channel_delivery"
  | "resumable"
  | "parked"
  | "outbox"
  | "channel_retention"
  | "instance_retention"
  | "dedupe_retention"
  | "session_retention"
  | "schedules"
  | "concurrency"
  | "timed_starts"
  | "bulk_operations";

/** A sweep's report: what each expiry task expired (a counter per wait kind that comes due by itself, core/model.ts ExpiryCounter), then the other tasks. */
export interface SweepReport extends Record<ExpiryCounter, number> {
  /** Instances failed by their workflow `timeoutSeconds`. */
  deadlinesExpired: number;
  staleLeasesReleased: number;
  messagesDelivered: number;
  /** Runnable, unlocked instances dispatched (their follow-up was lost or is late). */
  resumed: number;
  /** Parked instances resumed because other code is deployed now. */
  unparked: number;
  outbox: RelayReport;
  channelMessagesDeleted: number;
  /** Finished instances deleted after the retention (with their history and everything they own). */
  instancesPurged: number;
  /** CloudEvent dedupe rows deleted after the retention. */
  dedupeRowsPurged: number;
  /** Viewer-session revocations deleted once their session had expired anyway. */
  sessionRevocationsPurged: number;
  /** Rows that failed inside a task (the task went on with the others): which instance, why, and whether it was set aside. */
  rowFailures: RowFailure[];
  /** Instances started for due cron ticks (schedules.ts). */
  scheduledStarted: number;
  /** Queued instances of concurrency keys promoted into free slots (flow-control.ts). */
  queuedPromoted: number;
  /** Queued rate-limited instances admitted as their window made room, and debounced instances started once due (flow-control.ts). */
  timedStarted: number;
  /** Batches of bulk operations run (bulk.ts). */
  bulkBatches: number;
  /** Tasks another sweep was running (its lock was held), so this one skipped them. */
  skipped: SweepTask[];
  /** Tasks not started because the budget ran out. */
  deferred: SweepTask[];
  /** Tasks that failed (the others still ran), with the error's type and message. */
  failures: SweepFailure[];
  durationMs: number;
}

export interface SweepFailure {
  task: SweepTask;
  errorType: string;
  message: string;
}


export async function sweep(deps: SweepDeps, opts: SweepOptions = {}, scope?: DispatchScope): Promise<SweepReport> {
  const started = Date.now();
  const batch = opts.batchSize ?? 200;
  const budget = opts.budgetMs ?? 20_000;
  const inBudget = () => Date.now() - started < budget;
  const lockSeconds = opts.lockSeconds ?? 10;
  const holder = `${deps.workerId}/sweep-${crypto.randomUUID().slice(0, 8)}`;
  const { storage, dispatcher } = deps;
  const report: SweepReport = {
    ...(Object.fromEntries(EXPIRIES.map((e) => [e.counter, 0])) as Record<ExpiryCounter, number>),
    deadlinesExpired: 0,
    staleLeasesReleased: 0,
    messagesDelivered: 0,
    resumed: 0,
    unparked: 0,
    outbox: emptyRelayReport(),
    channelMessagesDeleted: 0,
    instancesPurged: 0,
    dedupeRowsPurged: 0,
    sessionRevocationsPurged: 0,
    rowFailures: [],
    scheduledStarted: 0,
    queuedPromoted: 0,
    timedStarted: 0,
    bulkBatches: 0,
    skipped: [],
    deferred: [],
    failures: [],
    durationMs: 0,
  };

  // The CPU budget (none unless asked): read between tasks and between batches.
  const clock = opts.cpuClock ?? defaultCpuClock();
  const cpuAtStart = clock();
  const cpuLeft = () => opts.cpuBudgetMs === undefined || clock() - cpuAtStart < opts.cpuBudgetMs;

  const runs = await deps.runs();
  const iso: Isolation = { storage, maxFailures: deps.quarantineAfter, failures: report.rowFailures, failedIds: new Set() };
  const retention = deps.retention;
  const dispatched = new Set<string>();
  const dispatch = (ids: string[]) => {
    for (const instanceId of ids) {
      if (dispatched.has(instanceId)) continue;
      dispatched.add(instanceId);
      dispatcher.dispatch({ instanceId }, scope);
    }
  };

  /** The task table, in the order an unbudgeted sweep runs it; the driver loop below runs it. */
  const table = new Map<SweepTask, { batchOnce: () => Promise<number>; repeat: boolean }>();
  const add = (name: SweepTask, batchOnce: () => Promise<number>, repeat = true) => void table.set(name, { batchOnce, repeat });

  /**
   * Run `task` under its system lock; `batchOnce` returns how many rows it
   * handled. A task that throws is reported and the sweep goes on with the
   * next one: one failing task never starves the others.
   */
  const task = async (name: SweepTask, batchOnce: () => Promise<number>, repeat = true) => {
    const t0 = performance.now();
    let result: "ok" | "failed" | "skipped" | "deferred" = "ok";
    try {
      result = await runTask(name, batchOnce, repeat);
    } catch (err) {
      result = "failed";
      const e = err instanceof Error ? err : new Error(String(err));
      report.failures.push({ task: name, errorType: e.name, message: e.message.slice(0, 500) });
      console.error(`edda: sweep task ${name} failed (the other tasks ran)`, e);
    } finally {
      if (result !== "deferred") deps.metrics?.sweepTask(name, result, (performance.now() - t0) / 1000);
    }
  };
  /** Whether the task ran, or was deferred (out of budget) or skipped (its lock held by another sweep). */
  const runTask = async (name: SweepTask, batchOnce: () => Promise<number>, repeat: boolean): Promise<"ok" | "skipped" | "deferred"> => {
    if (!inBudget()) return (report.deferred.push(name), "deferred");
    const lock = sweepLock(name, runs.deployment);
    if (!(await storage.tryAcquireSystemLock(lock, holder, lockSeconds))) return (report.skipped.push(name), "skipped");
    let held = Date.now();
    try {
      while (inBudget()) {
        const n = await batchOnce();
        if (!repeat || n < batch || !cpuLeft()) break;
        // Renew before the lease runs low; a lost lock means another sweep owns the task now.
        if (Date.now() - held > (lockSeconds * 1000) / 3) {
          if (!(await storage.renewSystemLock(lock, holder, lockSeconds))) break;
          held = Date.now();
        }
      }
    } finally {
      await storage.releaseSystemLock(lock, holder).catch(() => undefined);
    }
    return "ok";
  };

  // One task per wait kind that comes due by itself (wait-kinds.ts): timers fire, receive timeouts and per-wait webhooks expire.
  for (const expiry of EXPIRIES) {
    add(expiry.task, async () => {
      const ids = await expireDue(iso, expiry, batch);
      report[expiry.counter] += ids.length;
      dispatch(ids);
      return ids.length;
    });
  }
  // Status-guarded and deadline-guarded per instance: an instance is failed by its deadline exactly once.
  add("deadlines", async () => {
    const n = await expireDeadlines(deps, batch, scope);
    report.deadlinesExpired += n;
    return n;
  });
  add("stale_leases", async () => {
    const ids = await storage.releaseStaleLeases(batch);
    report.staleLeasesReleased += ids.length;
    deps.metrics?.leasesTakenOver(ids.length);
    dispatch(ids);
    return ids.length;
  });
  add("channel_delivery", async () => {
    const n = await deliverToWaitingSubscribers(deps, batch, scope, undefined, iso);
    report.messagesDelivered += n;
    return n;
  });
  // Not SKIP LOCKED (a plain read of runnable, unlocked rows): one batch per sweep,
  // the oldest first; anything dispatched above is left out.
  add(
    "resumable",
    async () => {
      // This deployment's engines are alive (the registry orders deployments and tells which are served).
      await storage.seeDeployment(runs.deployment);
      const ids = (await storage.findResumableInstances(batch, opts.resumeIdleSeconds ?? 2, runs)).filter((id) => !dispatched.has(id));
      report.resumed += ids.length;
      dispatch(ids);
      return ids.length;
    },
    false,
  );
  add(
    "parked",
    async () => {
      const n = await unparkChanged(deps, batch, scope);
      report.unparked += n;
      return n;
    },
    false,
  );
  add(
    "outbox",
    async () => {
      // Kept within the lock's lease; were it to run over, claims (SKIP LOCKED) still keep rows from being sent twice.
      const r = await relayOutbox(deps, { ...(scope ? { scope } : {}), budgetMs: Math.max(0, Math.min(budget - (Date.now() - started), (lockSeconds * 1000) / 2)) });
      for (const k of Object.keys(r) as (keyof RelayReport)[]) report.outbox[k] += r[k];
      return 0;
    },
    false,
  );
  add("channel_retention", async () => {
    const n = await storage.cleanupChannelMessages(opts.messageRetentionSeconds ?? retention.channelMessagesSeconds, batch);
    report.channelMessagesDeleted += n;
    return n;
  });
  const instanceRetention = opts.instanceRetentionSeconds ?? retention.finishedInstancesSeconds;
  add("instance_retention", async () => {
    // A purge that fails (a row the database refuses to delete) is retried alone, counted on the instance, and left out at the limit.
    const ids = await batchOrEach(
      iso,
      "retention",
      () => storage.purgeFinishedInstances(instanceRetention, batch, { maxFailures: iso.maxFailures }),
      () => storage.findPurgeableInstances(instanceRetention, batch, iso.maxFailures),
      (id) => storage.purgeFinishedInstances(instanceRetention, 1, { onlyInstanceId: id, maxFailures: iso.maxFailures }),
    );
    report.instancesPurged += ids.length;
    return ids.length;
  });
  add("dedupe_retention", async () => {
    const n = await storage.purgeCloudEventDedupe(opts.dedupeRetentionSeconds ?? retention.cloudEventDedupeSeconds, batch);
    report.dedupeRowsPurged += n;
    return n;
  });
  add("session_retention", async () => {
    const n = await storage.purgeExpiredSessionRevocations(batch);
    report.sessionRevocationsPurged += n;
    return n;
  });

  add("schedules", async () => {
    // Counted as each tick's transaction commits: a later failure in the batch does not hide them.
    return runDueSchedules(deps, batch, scope, () => report.scheduledStarted++);
  });
  add("concurrency", async () => {
    const n = await promoteAllQueued(deps, batch, scope);
    report.queuedPromoted += n;
    return n;
  });
  add("timed_starts", async () => {
    const n = await startTimedStarts(deps, batch, scope);
    report.timedStarted += n;
    return n;
  });

  add(
    "bulk_operations",
    async () => {
      // Within the lock's lease, like the outbox; the operation's row lock keeps racing workers off a batch anyway.
      const n = await sweepBulk(deps, Math.max(0, Math.min(budget - (Date.now() - started), (lockSeconds * 1000) / 2)), opts.bulkBatchSize, scope);
      report.bulkBatches += n;
      return n;
    },
    false,
  );

  // The driver: every task in table order; with a CPU budget, priority first, then the rotation, each
  // starting only while the budget lasts (the priority tasks and the rotation's head always start).
  const names = [...table.keys()];
  const order = opts.cpuBudgetMs === undefined ? names : sweepOrder(names, PRIORITY_TASKS, opts.rotationTurn ?? rotationTurn(Date.now()));
  const priorityCount = names.filter((n) => PRIORITY_TASKS.has(n)).length;
  // A task starts if, at the cost of the dearest task so far, it still fits: the budget is a limit, not a
  // target. (At the mean cost, a task dearer than the mean — the one that fired a timer — overshot it.)
  let dearest = 0;
  const nextFits = () => opts.cpuBudgetMs === undefined || clock() - cpuAtStart + dearest <= opts.cpuBudgetMs;
  for (const [position, name] of order.entries()) {
    if (!nextFits() && !mustRun(position, priorityCount)) {
      report.deferred.push(name);
      continue;
    }
    const { batchOnce, repeat } = table.get(name)!;
    const before = clock();
    await task(name, batchOnce, repeat);
    dearest = Math.max(dearest, clock() - before);
  }

  if (deps.metrics) {
    // A purge that keeps failing only leaves the row out (retention); the others quarantine the instance.
    for (const f of report.rowFailures) if (f.setAside && f.task !== "retention") deps.metrics.quarantined(f.task);
    await deps.metrics.sampleGauges(storage, [...deps.workflows.keys()]).catch((err: unknown) => console.error("edda: sampling the metrics gauges failed", err));
  }
  report.durationMs = Date.now() - started;
  return report;
}
