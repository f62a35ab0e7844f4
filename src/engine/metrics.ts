/**
 * OpenTelemetry metrics. `@opentelemetry/api` is an optional peer, as for
 * tracing: the application passes the module (`metrics: otel`), nothing here
 * imports it, and with no SDK registered its meter's instruments are no-ops.
 *
 * Instruments (names as OpenTelemetry sees them; a Prometheus exporter writes
 * dots as underscores and adds `_total` to counters and the unit to histograms):
 *
 *   edda.steps                      counter    {workflow, outcome}  outcome: the status a step left (completed, a wait kind's status…), or skipped, lease_lost, error
 *   edda.step.duration              histogram  {workflow, outcome}  seconds
 *   edda.instances.started          counter    {workflow}
 *   edda.instances.failed           counter    {workflow}
 *   edda.instances.quarantined      counter    {task}               set aside after repeated failures (step, timers, …)
 *   edda.leases.taken_over          counter                         expired leases of dead workers released by the sweep
 *   edda.sweep.task.duration        histogram  {task, result}       seconds; result ok, failed, skipped (lock held elsewhere)
 *   edda.queue.depth                gauge      {key}                queued instances per flow-control key
 *   edda.timers.due                 gauge                           timers past their expiry, not fired yet
 *   edda.timers.fire_lag            gauge                           seconds the oldest due timer is late
 *   edda.outbox.pending             gauge
 *   edda.outbox.lag                 gauge                           age in seconds of the oldest unrelayed row
 *   edda.outbox.dead_letters        gauge      {status}             invalid, expired
 *   edda.instances.quarantined_now  gauge
 *   edda.instances.unfinished       gauge      {status, reason}     unfinished instances by status and why they are not moving (GET /instances/:id/why's kind)
 *   edda.instances.oldest_age       gauge      {reason}             seconds the oldest instance with this reason has been in it (a stall shows here first)
 *
 * The gauges are what only the database knows: one read-only statement
 * (storage/gauges.ts) samples them at the end of each sweep and before each
 * `/metrics` scrape, and the observable gauges report the latest sample. A
 * `Metrics` is made once per API module (`metricsFor`), so engines built per
 * request (Workers) share one set of instruments and register the gauge
 * callbacks once.
 */
import type { MetricsSink } from "./deps.ts";
import type { EngineHooks } from "./hooks.ts";
import type { GaugeSample, Storage } from "../storage/types.ts";

/** Metric attributes: Edda's are all strings. */
export type MetricAttributes = Record<string, string>;
/** The parts of `@opentelemetry/api` Edda uses for metrics, declared locally (pass the module itself: it satisfies them). */
export interface OtelMeter {
  createCounter(name: string, options?: { description?: string; unit?: string }): { add(value: number, attributes?: MetricAttributes): void };
  createHistogram(name: string, options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } }): { record(value: number, attributes?: MetricAttributes): void };
  createObservableGauge(name: string, options?: { description?: string; unit?: string }): unknown;
  addBatchObservableCallback(callback: (result: { observe(gauge: unknown, value: number, attributes?: MetricAttributes): void }) => void, gauges: unknown[]): void;
}
export interface MetricsApi {
  metrics: { getMeter(name: string, version?: string): OtelMeter };
}

/** Most queue keys a sample reports (the deepest): a gauge's label set stays bounded. */
export const QUEUE_KEYS_SAMPLED = 100;
/** A sweep task takes milliseconds to seconds (a big batch, a slow broker): buckets in seconds, its unit. */
const SWEEP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds: from a fast in-process step to a slow external activity. */
const STEP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const shared = new WeakMap<MetricsApi, Metrics>();

/** The one `Metrics` of this API module in this process. */
export function metricsFor(api: MetricsApi): Metrics {
  let m = shared.get(api);
  if (!m) shared.set(api, (m = new Metrics(api)));
  return m;
}

export class Metrics implements MetricsSink {
  private readonly steps;
  private readonly stepDuration;
  private readonly started;
  private readonly failed;
  private readonly quarantines;
  private readonly takeovers;
  private readonly sweepDuration;
  private sample: GaugeSample | null = null;

  constructor(api: MetricsApi) {
    const meter = api.metrics.getMeter("edda-edge");
    this.steps = meter.createCounter("edda.steps", { description: "Steps run, by workflow and outcome" });
    this.stepDuration = meter.createHistogram("edda.step.duration", { unit: "s", description: "Step latency, by workflow and outcome", advice: { explicitBucketBoundaries: STEP_BUCKETS } });
    this.started = meter.createCounter("edda.instances.started", { description: "Instances started" });
    this.failed = meter.createCounter("edda.instances.failed", { description: "Instances that ended failed" });
    this.quarantines = meter.createCounter("edda.instances.quarantined", { description: "Instances set aside after repeated failures, by the task that failed" });
    this.takeovers = meter.createCounter("edda.leases.taken_over", { description: "Expired leases released by the sweep (their worker died or stalled)" });
    this.sweepDuration = meter.createHistogram("edda.sweep.task.duration", { unit: "s", description: "Sweep task duration, by task and result", advice: { explicitBucketBoundaries: SWEEP_BUCKETS } });

    const gauge = (name: string, description: string, unit?: string) => meter.createObservableGauge(name, { description, ...(unit ? { unit } : {}) });
    const queueDepth = gauge("edda.queue.depth", "Queued instances per flow-control key");
    const timersDue = gauge("edda.timers.due", "Timers past their expiry that have not fired");
    const fireLag = gauge("edda.timers.fire_lag", "How late the oldest due timer is", "s");
    const outboxPending = gauge("edda.outbox.pending", "Outbox rows not yet relayed");
    const outboxLag = gauge("edda.outbox.lag", "Age of the oldest outbox row not yet relayed", "s");
    const deadLetters = gauge("edda.outbox.dead_letters", "Outbox rows set aside, by status");
    const quarantinedNow = gauge("edda.instances.quarantined_now", "Instances quarantined now");
    const unfinished = gauge("edda.instances.unfinished", "Unfinished instances by status and by why they are not moving (GET /instances/:id/why)");
    const oldestAge = gauge("edda.instances.oldest_age", "How long the oldest instance with this reason has been in it", "s");
    meter.addBatchObservableCallback(
      (r) => {
        const s = this.sample;
        if (!s) return;
        for (const q of s.queues) r.observe(queueDepth, q.depth, { key: q.key });
        r.observe(timersDue, s.timersDue);
        r.observe(fireLag, s.timerLagSeconds);
        r.observe(outboxPending, s.outboxPending);
        r.observe(outboxLag, s.outboxLagSeconds);
        r.observe(deadLetters, s.deadLetters.invalid, { status: "invalid" });
        r.observe(deadLetters, s.deadLetters.expired, { status: "expired" });
        r.observe(quarantinedNow, s.quarantined);
        const oldest = new Map<string, number>();
        for (const w of s.reasons) {
          r.observe(unfinished, w.count, { status: w.status, reason: w.reason });
          oldest.set(w.reason, Math.max(oldest.get(w.reason) ?? 0, w.oldestSeconds));
        }
        for (const [reason, seconds] of oldest) r.observe(oldestAge, seconds, { reason });
      },
      [queueDepth, timersDue, fireLag, outboxPending, outboxLag, deadLetters, quarantinedNow, unfinished, oldestAge],
    );
  }

  step(workflowName: string | undefined, outcome: string, seconds: number): void {
    const attrs: MetricAttributes = workflowName === undefined ? { outcome } : { workflow: workflowName, outcome };
    this.steps.add(1, attrs);
    this.stepDuration.record(seconds, attrs);
  }

  quarantined(task: string): void {
    this.quarantines.add(1, { task });
  }

  leasesTakenOver(n: number): void {
    if (n > 0) this.takeovers.add(n);
  }

  sweepTask(task: string, result: "ok" | "failed" | "skipped", seconds: number): void {
    this.sweepDuration.record(seconds, { task, result });
  }

  /** Sample the database's gauges; they report this sample until the next. */
  async sampleGauges(storage: Storage, registered?: readonly string[]): Promise<void> {
    this.observe(await storage.sampleGauges(QUEUE_KEYS_SAMPLED, registered));
  }

  observe(sample: GaugeSample): void {
    this.sample = sample;
  }

  /** Hooks that count starts and failures. */
  readonly hooks: EngineHooks = {
    onWorkflowStart: (info) => this.started.add(1, { workflow: info.workflowName }),
    onWorkflowFailed: (info) => this.failed.add(1, { workflow: info.workflowName }),
  };
}
