/**
 * OpenTelemetry traces, built on the engine's hooks. `@opentelemetry/api` is
 * an optional peer: the application passes the module (`tracing: otel`), so
 * nothing here imports it and bundles without it still build; with no SDK
 * registered its tracer is a no-op.
 *
 * One run = one trace: starting an instance opens an `edda.start` span whose
 * traceparent is stored on the instance (trace_context) and carried by every
 * follow-up (StepRequest.traceparent, signed with the body; queue transports
 * carry the request as is). Each step is an `edda.step` span under it; inside
 * it, one span per activity attempt (`edda.activity`) or compensation
 * (`edda.compensation`), and an `edda.wait` span when the step ends waiting.
 * A step dispatched without a traceparent (sweeper, timers, wake-ups) reads
 * the stored one: one extra statement, only with tracing on. CloudEvents an
 * activity writes to the outbox carry the distributed-tracing extension
 * (`traceparent` of the attempt's span), so a consumer continues the trace.
 */
import type { EngineHooks, ActivityInfo } from "./hooks.ts";
import type { Dispatcher, DispatchScope, StepRequest } from "./dispatcher.ts";
import type { StepResult } from "./step.ts";
import { waitKindOf } from "../core/model.ts";

/** The parts of `@opentelemetry/api` Edda uses, declared locally (pass the module itself: it satisfies them). */
export interface OtelContext {
  getValue(key: symbol): unknown;
}
export interface OtelSpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
}
export interface OtelSpan {
  spanContext(): OtelSpanContext;
  setAttribute(key: string, value: string | number | boolean): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  addEvent(name: string, attributes?: Record<string, string | number | boolean>): unknown;
  recordException(exception: Error | string): unknown;
  updateName(name: string): unknown;
  end(): void;
}
export interface OtelTracer {
  startSpan(name: string, options?: { kind?: number; attributes?: Record<string, string | number | boolean> }, context?: OtelContext): OtelSpan;
}
export interface TracingApi {
  trace: {
    getTracer(name: string, version?: string): OtelTracer;
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
    setSpanContext(context: OtelContext, spanContext: OtelSpanContext): OtelContext;
    /** The global provider: a proxy whose `getDelegateTracer` is undefined until an SDK registers one. */
    getTracerProvider?(): unknown;
  };
  context: { active(): OtelContext };
  ROOT_CONTEXT: OtelContext;
}

const SpanKind = { INTERNAL: 0, PRODUCER: 3, CONSUMER: 4 } as const;
const ERROR = 2;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
export const TRACEPARENT_PATTERN = TRACEPARENT;

export function formatTraceparent(sc: OtelSpanContext): string | null {
  if (!/^[0-9a-f]{32}$/.test(sc.traceId) || /^0+$/.test(sc.traceId) || /^0+$/.test(sc.spanId)) return null;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

export function parseTraceparent(tp: string | null | undefined): OtelSpanContext | null {
  const m = tp ? TRACEPARENT.exec(tp) : null;
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return null;
  return { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16), isRemote: true };
}

const errorText = (e: unknown) => (e instanceof Error ? e : String(e));

export class Tracing {
  private readonly tracer: OtelTracer;
  /** The step running for an instance in this process: its context and the run's traceparent. */
  private readonly current = new Map<string, { ctx: OtelContext; span: OtelSpan; root: string | null }>();
  /** Open activity-attempt spans, keyed by instance, activity id and attempt. */
  private readonly attempts = new Map<string, OtelSpan>();

  constructor(private readonly api: TracingApi) {
    this.tracer = api.trace.getTracer("edda-edge");
  }

  private parent(traceparent: string | null | undefined): OtelContext {
    const sc = parseTraceparent(traceparent);
    return sc ? this.api.trace.setSpanContext(this.api.ROOT_CONTEXT, sc) : this.api.context.active();
  }

  /** The `edda.start` span of a new instance; returns the traceparent its steps will join. */
  started(workflowName: string, instanceId: string, parentTraceparent?: string | null): string | null {
    const span = this.tracer.startSpan(
      `edda.start ${workflowName}`,
      { kind: SpanKind.PRODUCER, attributes: { "edda.workflow.name": workflowName, "edda.instance.id": instanceId } },
      this.parent(parentTraceparent),
    );
    span.end();
    return formatTraceparent(span.spanContext());
  }

  /**
   * Whether an SDK is registered now. Without one every span is a no-op with
   * no trace id to carry, so a step need not read its stored trace context
   * (that read was the one cost of `tracing` without an SDK: BENCHMARKS.md).
   */
  private sdkRegistered(): boolean {
    const provider = this.api.trace.getTracerProvider?.() as { getDelegateTracer?: (name: string) => unknown } | undefined;
    return typeof provider?.getDelegateTracer !== "function" || provider.getDelegateTracer("edda-edge") !== undefined;
  }

  /** Run one step inside its `edda.step` span. */
  async step(req: StepRequest, storedTraceparent: () => Promise<string | null>, run: () => Promise<StepResult>): Promise<StepResult> {
    const root = req.traceparent ?? (this.sdkRegistered() ? await storedTraceparent().catch(() => null) : null);
    const parent = this.parent(root);
    const span = this.tracer.startSpan("edda.step", { kind: SpanKind.CONSUMER, attributes: { "edda.instance.id": req.instanceId, "edda.step.handoff": req.lease !== undefined } }, parent);
    const entry = { ctx: this.api.trace.setSpan(parent, span), span, root: root ?? formatTraceparent(span.spanContext()) };
    this.current.set(req.instanceId, entry);
    try {
      const r = await run();
      span.setAttribute("edda.step.result", r.status);
      if (r.status === "concluded") {
        span.setAttribute("edda.instance.status", r.instanceStatus);
        const wait = waitKindOf(r.instanceStatus);
        if (wait?.view.span) {
          const { kind } = wait;
          this.tracer.startSpan(`edda.wait ${kind}`, { attributes: { "edda.instance.id": req.instanceId, "edda.wait.kind": kind } }, entry.ctx).end();
        }
      } else if (r.status === "skipped") span.setAttribute("edda.step.skip_reason", r.reason);
      return r;
    } catch (err) {
      span.recordException(errorText(err));
      span.setStatus({ code: ERROR });
      throw err;
    } finally {
      if (this.current.get(req.instanceId) === entry) this.current.delete(req.instanceId);
      span.end();
    }
  }

  /** The dispatcher, with each follow-up carrying its run's traceparent. */
  dispatcher(inner: Dispatcher): Dispatcher {
    const withTrace = (req: StepRequest): StepRequest => {
      if (req.traceparent) return req;
      const root = this.current.get(req.instanceId)?.root;
      return root ? { ...req, traceparent: root } : req;
    };
    return {
      attach: (runner) => inner.attach(runner),
      dispatch: (req: StepRequest, scope?: DispatchScope) => inner.dispatch(withTrace(req), scope),
      ...(inner.wakeIn ? { wakeIn: (s: number, scope?: DispatchScope) => inner.wakeIn!(s, scope) } : {}),
      ...(inner.close ? { close: () => inner.close!() } : {}),
    };
  }

  /** The traceparent of an activity attempt's open span (for the events it sends). */
  activityTraceparent(instanceId: string, activityId: string, attempt: number): string | null {
    const span = this.attempts.get(this.attemptKey({ instanceId, activityId, attempt }));
    return span ? formatTraceparent(span.spanContext()) : null;
  }

  private attemptKey = (i: Pick<ActivityInfo, "instanceId" | "activityId" | "attempt">) => `${i.instanceId}\u0000${i.activityId}\u0000${i.attempt}`;

  private endAttempt(info: ActivityInfo, error?: unknown, retryInSeconds?: number) {
    const key = this.attemptKey(info);
    const span = this.attempts.get(key);
    if (!span) return;
    this.attempts.delete(key);
    if (error !== undefined) {
      span.recordException(errorText(error));
      span.setStatus({ code: ERROR, message: error instanceof Error ? error.message : String(error) });
      if (retryInSeconds !== undefined) span.setAttribute("edda.activity.retry_in_seconds", retryInSeconds);
    }
    span.end();
  }

  /** Hooks that open and close the attempt spans and annotate the step. */
  readonly hooks: EngineHooks = {
    onActivityStart: (info) => {
      const step = this.current.get(info.instanceId);
      step?.span.setAttribute("edda.workflow.name", info.workflowName);
      step?.span.updateName(`edda.step ${info.workflowName}`);
      const compensation = info.activityId.startsWith("compensate:");
      const span = this.tracer.startSpan(
        `${compensation ? "edda.compensation" : "edda.activity"} ${info.activityName}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            "edda.workflow.name": info.workflowName,
            "edda.instance.id": info.instanceId,
            "edda.activity.id": info.activityId,
            "edda.activity.name": info.activityName,
            "edda.activity.attempt": info.attempt,
          },
        },
        step?.ctx ?? this.api.context.active(),
      );
      this.attempts.set(this.attemptKey(info), span);
    },
    onActivityComplete: (info) => this.endAttempt(info),
    onActivityRetry: (info) => this.endAttempt(info, info.error, info.retryInSeconds),
    onActivityFailed: (info) => this.endAttempt(info, info.error),
    onWorkflowComplete: (info) => this.current.get(info.instanceId)?.span.addEvent("edda.workflow.completed", { "edda.workflow.name": info.workflowName }),
    onWorkflowFailed: (info) => this.current.get(info.instanceId)?.span.addEvent("edda.workflow.failed", { "edda.workflow.name": info.workflowName }),
    onWorkflowCancelled: (info) => this.current.get(info.instanceId)?.span.addEvent("edda.workflow.cancelled", { "edda.workflow.name": info.workflowName }),
  };
}

/** Both sets of hooks, the user's first; one throwing does not stop the other. */
export function combineHooks(a: EngineHooks, b: EngineHooks): EngineHooks {
  const out: EngineHooks = {};
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof EngineHooks>) {
    const fa = a[k] as ((info: unknown) => void) | undefined;
    const fb = b[k] as ((info: unknown) => void) | undefined;
    (out as Record<string, (info: unknown) => void>)[k] = (info) => {
      try {
        fa?.(info);
      } finally {
        fb?.(info);
      }
    };
  }
  return out;
}
