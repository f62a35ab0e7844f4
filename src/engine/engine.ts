/**
 * The engine: registered workflows + storage + dispatcher. Starts, cancels and
 * inspects instances, runs steps, and sweeps. Stateless between calls — every
 * fact lives in Postgres — so any number of engines (requests, processes,
 * isolates) can share one database.
 */
import type { Workflow } from "../core/definitions.ts";
import { ConflictError, NotFoundError, ValidationError } from "../core/errors.ts";
import type { RetryPolicy } from "../core/retry.ts";
import type { WaitRequest } from "../core/replay.ts";
import { fromJson, toJson, type ErrorClass } from "../core/serialization.ts";
import { sha256Hex } from "../core/signature.ts";
import type { Fence, InstanceRecord, InstanceStatus, ListInstancesQuery, NewCompensation, Storage } from "../storage/types.ts";
import type { Dispatcher, DispatchScope, StepRequest, StepRunner } from "./dispatcher.ts";
import type { EngineHooks } from "./hooks.ts";
import { runStep, type StepResult } from "./step.ts";
import { sweep, type SweepOptions, type SweepReport } from "./sweeper.ts";

export interface EngineOptions {
  storage: Storage;
  workflows: Workflow[];
  dispatcher: Dispatcher;
  serviceName?: string;
  workerId?: string;
  /** Lease length for a step (default 300 s; per-workflow `lockTimeoutSeconds` wins). */
  leaseSeconds?: number;
  /** Lease handed to a follow-up step; if the follow-up is lost it expires and the sweeper resumes (default 30 s). */
  handoffLeaseSeconds?: number;
  retryPolicy?: RetryPolicy;
  hooks?: EngineHooks;
  /** Error classes restored by name when a recorded error is replayed. */
  errorClasses?: ErrorClass[];
}

export interface StartOptions {
  instanceId?: string;
}

export interface InstanceView {
  instanceId: string;
  workflowName: string;
  status: InstanceStatus;
  run: number;
  input: unknown;
  output: unknown;
  error: unknown;
  cancellation: unknown;
  currentActivityId: string | null;
  startedAt: string;
  updatedAt: string;
}

export class Engine implements StepRunner {
  readonly storage: Storage;
  readonly dispatcher: Dispatcher;
  readonly workflows = new Map<string, Workflow>();
  readonly serviceName: string;
  readonly workerId: string;
  readonly defaultLeaseSeconds: number;
  readonly handoffLeaseSeconds: number;
  readonly retryPolicy: RetryPolicy | undefined;
  readonly hooks: EngineHooks;
  readonly errorClasses: Record<string, ErrorClass>;
  private readonly hashes = new Map<string, Promise<string>>();

  constructor(opts: EngineOptions) {
    this.storage = opts.storage;
    this.dispatcher = opts.dispatcher;
    for (const wf of opts.workflows) {
      if (this.workflows.has(wf.workflowName)) throw new TypeError(`workflow "${wf.workflowName}" registered twice`);
      this.workflows.set(wf.workflowName, wf);
    }
    this.serviceName = opts.serviceName ?? "edda-edge";
    this.workerId = opts.workerId ?? `${this.serviceName}:${crypto.randomUUID().slice(0, 8)}`;
    this.defaultLeaseSeconds = opts.leaseSeconds ?? 300;
    this.handoffLeaseSeconds = opts.handoffLeaseSeconds ?? 30;
    this.retryPolicy = opts.retryPolicy;
    this.hooks = opts.hooks ?? {};
    this.errorClasses = Object.fromEntries((opts.errorClasses ?? []).map((C) => [new C("").name, C]));
    this.dispatcher.attach(this);
  }

  workflow(name: string): Workflow {
    const wf = this.workflows.get(name);
    if (!wf) throw new NotFoundError(`unknown workflow "${name}"`);
    return wf;
  }

  /** Validate input, record the definition, create the instance and dispatch its first step. */
  async start(workflow: Workflow | string, input: unknown, opts: StartOptions = {}, scope?: DispatchScope): Promise<{ instanceId: string; status: InstanceStatus; created: boolean }> {
    const wf = typeof workflow === "string" ? this.workflow(workflow) : this.workflow(workflow.workflowName);
    let value = input;
    if (wf.options.input) {
      const parsed = wf.options.input.safeParse(input);
      if (!parsed.success) throw new ValidationError(`input for workflow "${wf.workflowName}" is invalid`, parsed.error.issues);
      value = parsed.data;
    }
    if (opts.instanceId !== undefined && !/^[A-Za-z0-9_.:-]{1,200}$/.test(opts.instanceId)) {
      throw new ValidationError("instanceId must be 1–200 characters of A-Z a-z 0-9 _ . : -", [{ path: ["instanceId"], message: "invalid instance id" }]);
    }
    const sourceHash = await this.ensureDefinition(wf);
    const { created, instance } = await this.storage.createInstance({
      instanceId: opts.instanceId ?? crypto.randomUUID(),
      workflowName: wf.workflowName,
      sourceHash,
      ownerService: this.serviceName,
      inputData: toJson(value ?? null),
      lockTimeoutSeconds: wf.options.lockTimeoutSeconds ?? null,
    });
    if (created) {
      this.hooks.onWorkflowStart?.({ instanceId: instance.instanceId, workflowName: wf.workflowName, input: value });
      this.dispatcher.dispatch({ instanceId: instance.instanceId }, scope);
    }
    return { instanceId: instance.instanceId, status: instance.status, created };
  }

  private ensureDefinition(wf: Workflow): Promise<string> {
    let p = this.hashes.get(wf.workflowName);
    if (!p) {
      p = (async () => {
        const hash = await sha256Hex(wf.source);
        await this.storage.upsertWorkflowDefinition(wf.workflowName, hash, wf.source);
        return hash;
      })();
      p.catch(() => this.hashes.delete(wf.workflowName));
      this.hashes.set(wf.workflowName, p);
    }
    return p;
  }

  runStep(req: StepRequest, scope?: DispatchScope): Promise<StepResult> {
    return runStep(this, req, scope);
  }

  async cancel(instanceId: string, cancelledBy = "api", scope?: DispatchScope): Promise<{ status: InstanceStatus }> {
    const r = await this.storage.cancelInstance(instanceId, cancelledBy);
    if (!r) throw new NotFoundError(`instance "${instanceId}" not found`);
    if (!r.ok) throw new ConflictError(`instance "${instanceId}" is ${r.status} and cannot be cancelled`);
    if (r.status === "compensating") this.dispatcher.dispatch({ instanceId }, scope);
    else this.hooks.onWorkflowCancelled?.({ instanceId, workflowName: (await this.storage.getInstance(instanceId))?.workflowName ?? "" });
    return { status: r.status };
  }

  async getInstance(instanceId: string, opts: { history?: boolean } = {}): Promise<(InstanceView & { history?: unknown[] }) | null> {
    const inst = await this.storage.getInstance(instanceId);
    if (!inst) return null;
    const view: InstanceView & { history?: unknown[] } = toView(inst);
    if (opts.history) {
      const events = await this.storage.loadHistory(instanceId);
      view.history = events.map((e) => ({
        id: e.id,
        activityId: e.activityId,
        eventType: e.eventType,
        data: e.data.type === "json" ? fromJson(e.data.json) : { $binary: e.data.bytes.length },
        createdAt: e.createdAt.toISOString(),
      }));
    }
    return view;
  }

  async findInstances(query: ListInstancesQuery): Promise<{ instances: InstanceView[]; nextCursor: string | null }> {
    const page = await this.storage.listInstances(query);
    return { instances: page.instances.map(toView), nextCursor: page.nextCursor };
  }

  /** Fire due timers and dispatch the instances they made runnable. */
  async fireDueTimers(scope?: DispatchScope): Promise<number> {
    const ids = await this.storage.fireExpiredTimers(500);
    for (const instanceId of ids) this.dispatcher.dispatch({ instanceId }, scope);
    return ids.length;
  }

  sweep(opts?: SweepOptions, scope?: DispatchScope): Promise<SweepReport> {
    return sweep(this, opts, scope);
  }

  /** Channel waits: provided by the channels module. */
  waitForMessage(_fence: Fence, wait: WaitRequest, _comps: NewCompensation[], _scope: DispatchScope | undefined, _lease: number): Promise<StepResult> {
    throw new TypeError(`waiting for messages (${wait.kind}) is not supported by this engine build`);
  }

  recur(_fence: Fence, _input: unknown, _scope: DispatchScope | undefined): Promise<StepResult> {
    throw new TypeError("recur is not supported by this engine build");
  }
}

export function toView(inst: InstanceRecord): InstanceView {
  return {
    instanceId: inst.instanceId,
    workflowName: inst.workflowName,
    status: inst.status,
    run: inst.run,
    input: fromJson(inst.inputData),
    output: inst.outputData === null ? null : fromJson(inst.outputData),
    error: inst.errorData === null ? null : fromJson(inst.errorData),
    cancellation: inst.cancelData === null ? null : fromJson(inst.cancelData),
    currentActivityId: inst.currentActivityId,
    startedAt: inst.startedAt.toISOString(),
    updatedAt: inst.updatedAt.toISOString(),
  };
}
