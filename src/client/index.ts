/**
 * `edda-edge/client`: a typed HTTP client for an Edda Edge app. Only `fetch`
 * and Web APIs — it runs in Node, Deno, Workers and browsers — and it imports
 * nothing from the server at run time: workflow types come from
 * `createClient<typeof workflows>()`, a type-only use of the definitions.
 *
 *   const edda = createClient<typeof workflows>({ baseUrl, token });
 *   const run = await edda.start("order_saga", { orderId: "o1", amount: 5 });
 *   const outcome = await run.result({ timeoutSeconds: 60 });
 *   if (outcome.status === "completed") console.log(outcome.output.status);
 */
import type { Workflow } from "../core/definitions.ts";
// The server's views, as types only: the client's answers are the engine's views over JSON.
import type { FlowControlView, HistoryEntry, InstanceDetail, InstanceFailureView, InstanceView, StoredError } from "../engine/views.ts";
import type { DeadLetterView } from "../engine/dead-letters.ts";
import type { ChildSummary, DeadLetterStatus } from "../engine/records.ts";
import type { InstanceStatus, WhyKind } from "../core/model.ts";
import type { HistoryBudget, WhyFacts, WhyReason, WhyReasonOf, WhyView } from "../engine/why-view.ts";
import type { DeploymentsView, DeploymentView } from "../engine/deployment.ts";
import type { UpgradeResult } from "../engine/versioning.ts";
import type { StartInput, WorkflowName, WorkflowResult, WorkflowSet } from "./types.ts";
import { streamEvents, type StreamEvent, type StreamOptions, type StreamTransport } from "./stream.ts";
import { repairMethods, type RepairMethods } from "./repairs.ts";

export type { BulkAction, BulkActionName, BulkFilter, BulkOperationView, ForkedInstance, ForkedWebhook, RepairedInstance, RepairMethods } from "./repairs.ts";
export type { StreamEndEvent, StreamEvent, StreamEventKind, StreamItemEvent, StreamOptions } from "./stream.ts";
export type { AnyWorkflow, ByName, Jsonified, JsonObject, Members, StartInput, WorkflowName, WorkflowResult, WorkflowSet } from "./types.ts";
/** DeadLetter: an outbox event the relay set aside, the broker refused it (`invalid`) or it ran out of attempts or age (`expired`). */
export type { DeadLetterView as DeadLetter, DeadLetterStatus };
export type { ChildSummary, DeploymentsView, DeploymentView, UpgradeResult, FlowControlView, HistoryEntry, InstanceDetail, InstanceFailureView, InstanceStatus, InstanceView, StoredError, HistoryBudget, WhyFacts, WhyKind, WhyReason, WhyReasonOf, WhyView };

export interface ClientOptions {
  /** The app's URL, e.g. `https://edda.example.com` (a path prefix is kept). */
  baseUrl: string;
  /** Bearer token (EDDA_API_TOKEN). */
  token?: string;
  /** Defaults to the global fetch (a service binding's fetch on Workers). */
  fetch?: (input: string, init: RequestInit) => Promise<Response>;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

/** The latest failure counted against an instance (a quarantined one shows why). */
export type InstanceFailure = InstanceFailureView;

/** A finished instance: exactly one of output, error, cancellation is set by its status. */
export type InstanceOutcome<O = unknown> =
  | { instanceId: string; workflowName: string; status: "completed"; output: O; error: null; cancellation: null }
  | { instanceId: string; workflowName: string; status: "failed"; output: null; error: StoredError; cancellation: null }
  | { instanceId: string; workflowName: string; status: "cancelled"; output: null; error: StoredError | null; cancellation: { cancelled_by: string; cancelled_at: string; previous_status: string } };

export interface ResultOptions {
  /** How long to wait in total (default 60 s; 0 asks once). */
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

export interface StartedInstance<O = unknown> {
  instanceId: string;
  status: InstanceStatus;
  /** false when an instance with this instanceId already existed. */
  created: boolean;
  /** Wait for the outcome (see `EddaClient.result`). */
  result(opts?: ResultOptions): Promise<InstanceOutcome<O>>;
  /** The instance's realtime stream (see `EddaClient.stream`). */
  stream(opts?: StreamOptions): AsyncGenerator<StreamEvent, void, undefined>;
}

export interface ListQuery<N extends string = string> {
  status?: InstanceStatus | InstanceStatus[];
  workflow?: N;
  limit?: number;
  cursor?: string;
  startedAfter?: Date | string;
  startedBefore?: Date | string;
  /** Only instances on this deployment. */
  deployment?: string;
  /** Only instances with every one of these tags (`GET /instances?tag=key:value`, repeated). */
  tags?: Record<string, string>;
}

export interface OutgoingCloudEvent {
  type: string;
  source: string;
  /** Default: a random UUID. With `source`, the dedupe key. */
  id?: string;
  data?: unknown;
  subject?: string;
  time?: Date | string;
  /** Deliver to this instance only (the `eddainstanceid` extension). */
  instanceId?: string;
  /** More CloudEvents extension attributes (lower-case names), e.g. `traceparent`. */
  extensions?: Record<string, string | number | boolean>;
}

export interface EddaClient<W extends WorkflowSet> extends RepairMethods<WorkflowName<W>> {
  start<N extends WorkflowName<W>>(name: N, input: StartInput<W, N>, opts?: { instanceId?: string; /** Order within a flow-control key's queue (higher first; default 0). */ priority?: number }): Promise<StartedInstance<WorkflowResult<W, N>>>;
  /** The instance and its children (with `history`, the first page of its history), or null if there is none with this id. */
  get(instanceId: string, opts?: { history?: boolean }): Promise<InstanceDetail | null>;
  /** Why the instance is not moving and what will move it (`GET /instances/:id/why`), or null if there is none with this id. */
  why(instanceId: string): Promise<WhyView | null>;
  /** The deployments that started instances, with their unfinished ones by status (`GET /deployments`). */
  deployments(): Promise<DeploymentsView>;
  /** Move an unfinished instance to the deployment answering, when its history replays with its code (EddaApiError 409 with the mismatch otherwise). */
  upgrade(instanceId: string): Promise<UpgradeResult>;
  list(query?: ListQuery<WorkflowName<W>>): Promise<{ instances: InstanceView[]; nextCursor: string | null }>;
  cancel(instanceId: string): Promise<{ status: InstanceStatus }>;
  /** One page of the history, oldest first (at most 500 entries; default 100); `after` is the previous page's `nextCursor`. */
  history(instanceId: string, opts?: { after?: string; limit?: number }): Promise<{ history: HistoryEntry[]; nextCursor: string | null }>;
  /** Retry a quarantined instance (EddaApiError 409 when it is not quarantined). */
  resume(instanceId: string): Promise<{ status: InstanceStatus }>;
  /** A point-to-point message to one instance, on a channel. */
  send(instanceId: string, channel: string, data?: unknown, opts?: { metadata?: Record<string, unknown> }): Promise<{ messageId: string }>;
  publish(channel: string, data?: unknown, opts?: { metadata?: Record<string, unknown> }): Promise<{ messageId: string }>;
  /** Post a CloudEvent (structured mode) to the app's ingestion route. */
  sendEvent(event: OutgoingCloudEvent): Promise<{ id: string; duplicate: boolean; messageId?: string; instanceId?: string }>;
  /**
   * Wait for an instance's outcome: long-polls `GET /instances/:id/result`
   * until it has finished or `timeoutSeconds` have passed (then throws
   * ResultTimeoutError). Name the workflow to type the output.
   */
  result<N extends WorkflowName<W> = never>(instanceId: string, opts?: ResultOptions & { workflow?: N }): Promise<InstanceOutcome<[N] extends [never] ? unknown : WorkflowResult<W, N>>>;
  /**
   * The instance's realtime stream (`GET /instances/:id/stream`): emits and
   * activity chunks in order, then one `end` event with the final status.
   * Reconnects and resumes with Last-Event-ID by itself: nothing missed,
   * nothing twice. A `retry` event means the items of that activity so far
   * belong to an attempt that did not finish; the next attempt's follow.
   */
  stream(instanceId: string, opts?: StreamOptions): AsyncGenerator<StreamEvent, void, undefined>;
  /** The app's scheduled workflows with their next and last run (`GET /schedules`). */
  schedules(): Promise<ScheduleView<WorkflowName<W>>[]>;
  /** A page of the outbox's dead letters (`invalid`, `expired`), newest first; data only with `include: "payloads"`. */
  deadLetters(query?: DeadLetterQuery): Promise<{ events: DeadLetterView[]; nextCursor: string | null }>;
  /** Re-arm a dead letter: pending again, attempts reset, relayed now (EddaApiError 409 when it is not a dead letter). */
  redeliverDeadLetter(eventId: string): Promise<{ status: "pending" }>;
  /** Delete a dead letter (EddaApiError 409 when it is not a dead letter). */
  discardDeadLetter(eventId: string): Promise<{ discarded: true }>;
}


export interface DeadLetterQuery {
  /** Default: both. */
  status?: DeadLetterStatus | DeadLetterStatus[];
  /** Only events of this CloudEvents type. */
  type?: string;
  /** At most 100 (default 50). */
  limit?: number;
  cursor?: string;
  include?: "payloads";
}


export interface ScheduleView<N extends string = string> {
  workflow: N;
  cron: string;
  timezone: string;
  missed: "skip" | "latest";
  /** ISO 8601; null when the pattern never fires again. */
  nextRunAt: string | null;
  lastRunAt: string | null;
  lastInstanceId: string | null;
  /** When an operator paused it (`pauseSchedule`); null while it ticks. */
  pausedAt: string | null;
}

/** What the client throws: EddaApiError (the app answered with an error) or EddaConnectionError (no answer). */
export class EddaClientError extends Error {
  override name = "EddaClientError";
}

/** An RFC 9457 problem, as the app sends it (`error`, `error_type` and `issues` are its extensions). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance?: string;
  error_type?: string;
  issues?: unknown[];
  [extension: string]: unknown;
}

/** A non-2xx answer from the app: its RFC 9457 members as fields, the whole problem body in `body`. */
export class EddaApiError extends EddaClientError {
  override name = "EddaApiError";
  /** The problem type URI (`about:blank` when the app names none, or the body was no problem). */
  readonly type: string;
  /** The HTTP status phrase for `about:blank` problems. */
  readonly title: string | undefined;
  readonly detail: string | undefined;
  /** The request path the problem occurred on. */
  readonly instance: string | undefined;
  /** Validation issues (zod's, with their `path`), when the app sent any. */
  readonly issues: unknown[] | undefined;
  constructor(
    readonly status: number,
    readonly errorType: string,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
    const p = (typeof body === "object" && body !== null ? body : {}) as Partial<Problem>;
    this.type = typeof p.type === "string" ? p.type : "about:blank";
    this.title = typeof p.title === "string" ? p.title : undefined;
    this.detail = typeof p.detail === "string" ? p.detail : undefined;
    this.instance = typeof p.instance === "string" ? p.instance : undefined;
    this.issues = Array.isArray(p.issues) ? p.issues : undefined;
  }
}

/** The request got no answer: the app is down, the URL is wrong, DNS or TLS failed (`cause` is the fetch error). */
export class EddaConnectionError extends EddaClientError {
  override name = "EddaConnectionError";
  constructor(
    readonly url: string,
    readonly method: string,
    cause: unknown,
  ) {
    const why = cause instanceof Error ? ((cause.cause as { code?: string } | undefined)?.code ?? cause.message) : String(cause);
    super(`${method} ${url}: no answer from the Edda Edge app (${why}); is it running at this URL?`, { cause });
  }
}

/** `result()` gave up: the instance was still going at the deadline. */
export class ResultTimeoutError extends Error {
  override name = "ResultTimeoutError";
  constructor(
    readonly instanceId: string,
    readonly status: InstanceStatus,
  ) {
    super(`instance "${instanceId}" is still ${status}`);
  }
}

/** The server holds one result request at most this long; longer waits are several requests. */
const POLL_CHUNK_SECONDS = 25;

export function createClient<W extends WorkflowSet = readonly Workflow<any, any, string, any>[]>(opts: ClientOptions): EddaClient<W> {
  const base = opts.baseUrl.replace(/\/+$/, "");
  const fetchFn = opts.fetch ?? ((input: string, init: RequestInit) => fetch(input, init));
  const enc = encodeURIComponent;

  async function call<T>(method: string, path: string, body?: unknown, init: { contentType?: string; signal?: AbortSignal; accept?: number[] } = {}): Promise<{ status: number; body: T }> {
    const headers: Record<string, string> = { accept: "application/json", ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (body !== undefined) headers["content-type"] = init.contentType ?? "application/json";
    let res: Response;
    let text: string;
    try {
      res = await fetchFn(base + path, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        ...(init.signal ? { signal: init.signal } : {}),
      });
      text = await res.text(); // a connection that drops mid-body is no answer either
    } catch (err) {
      // The caller's own abort stays an abort; anything else is "no answer".
      if (init.signal?.aborted) throw err;
      throw new EddaConnectionError(base + path, method, err);
    }
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = text;
    }
    if (res.ok || init.accept?.includes(res.status)) return { status: res.status, body: parsed as T };
    const p = (typeof parsed === "object" && parsed !== null ? parsed : {}) as { error?: string; error_type?: string; detail?: string };
    throw new EddaApiError(res.status, p.error_type ?? "HttpError", p.detail ?? p.error ?? `${method} ${path} → HTTP ${res.status}`, parsed);
  }

  async function result(instanceId: string, o: ResultOptions = {}): Promise<InstanceOutcome<any>> {
    const deadline = Date.now() + (o.timeoutSeconds ?? 60) * 1000;
    for (;;) {
      const asked = Math.max(0, Math.min(POLL_CHUNK_SECONDS, (deadline - Date.now()) / 1000));
      const sent = Date.now();
      const r = await call<InstanceOutcome | { status: InstanceStatus }>("GET", `/instances/${enc(instanceId)}/result?wait=${asked.toFixed(3)}`, undefined, o.signal ? { signal: o.signal } : {});
      if (r.status === 200) return r.body as InstanceOutcome;
      if (Date.now() >= deadline || asked === 0) throw new ResultTimeoutError(instanceId, r.body.status);
      // A server that answered well before the asked wait (an old one, a proxy): do not spin.
      if (Date.now() - sent < asked * 500) await new Promise((resolve) => setTimeout(resolve, Math.min(1000, deadline - Date.now())));
    }
  }

  const transport: StreamTransport = {
    async open(path, extra, signal) {
      const headers: Record<string, string> = { ...opts.headers, ...extra };
      if (opts.token) headers.authorization = `Bearer ${opts.token}`;
      let res: Response;
      try {
        res = await fetchFn(base + path, { method: "GET", headers, ...(signal ? { signal } : {}) });
      } catch (err) {
        if (signal?.aborted) throw err;
        throw new EddaConnectionError(base + path, "GET", err);
      }
      if (res.ok && res.body) return res.body;
      const text = await res.text().catch(() => "");
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: kept as text
      }
      const p = (typeof parsed === "object" && parsed !== null ? parsed : {}) as { error?: string; error_type?: string; detail?: string };
      throw new EddaApiError(res.status, p.error_type ?? "HttpError", p.detail ?? p.error ?? `GET ${path} → HTTP ${res.status}`, parsed);
    },
    isAnswer: (err) => err instanceof EddaApiError,
  };
  const stream = (instanceId: string, o?: StreamOptions) => streamEvents(transport, instanceId, o);

  const iso = (d: Date | string) => (typeof d === "string" ? d : d.toISOString());

  return {
    ...repairMethods<WorkflowName<W>>(call),
    async start(name, input, o = {}) {
      const r = await call<{ instanceId: string; status: InstanceStatus }>("POST", `/workflows/${enc(name)}/instances`, {
        input,
        ...(o.instanceId ? { instanceId: o.instanceId } : {}),
        ...(o.priority !== undefined ? { priority: o.priority } : {}),
      });
      const instanceId = r.body.instanceId;
      return { instanceId, status: r.body.status, created: r.status === 201, result: (ro) => result(instanceId, ro), stream: (so) => stream(instanceId, so) };
    },
    async get(instanceId, o = {}) {
      const r = await call<InstanceDetail | null>("GET", `/instances/${enc(instanceId)}${o.history ? "?history=1" : ""}`, undefined, { accept: [404] });
      return r.status === 404 ? null : r.body;
    },
    async why(instanceId) {
      const r = await call<WhyView | null>("GET", `/instances/${enc(instanceId)}/why`, undefined, { accept: [404] });
      return r.status === 404 ? null : r.body;
    },
    async deployments() {
      return (await call<DeploymentsView>("GET", "/deployments")).body;
    },
    async upgrade(instanceId) {
      return (await call<UpgradeResult>("POST", `/instances/${enc(instanceId)}/upgrade`)).body;
    },
    async list(q = {}) {
      const params = new URLSearchParams();
      if (q.status) params.set("status", ([] as InstanceStatus[]).concat(q.status).join(","));
      if (q.workflow) params.set("workflow", q.workflow);
      if (q.deployment) params.set("deployment", q.deployment);
      if (q.limit !== undefined) params.set("limit", String(q.limit));
      if (q.cursor) params.set("cursor", q.cursor);
      if (q.startedAfter) params.set("started_after", iso(q.startedAfter));
      if (q.startedBefore) params.set("started_before", iso(q.startedBefore));
      for (const [key, value] of Object.entries(q.tags ?? {})) params.append("tag", `${key}:${value}`);
      const qs = params.toString();
      return (await call<{ instances: InstanceView[]; nextCursor: string | null }>("GET", `/instances${qs ? `?${qs}` : ""}`)).body;
    },
    async cancel(instanceId) {
      return (await call<{ status: InstanceStatus }>("POST", `/instances/${enc(instanceId)}/cancel`)).body;
    },
    async history(instanceId, o = {}) {
      const params = new URLSearchParams();
      if (o.after) params.set("after", o.after);
      if (o.limit !== undefined) params.set("limit", String(o.limit));
      const qs = params.toString();
      return (await call<{ history: HistoryEntry[]; nextCursor: string | null }>("GET", `/instances/${enc(instanceId)}/history${qs ? `?${qs}` : ""}`)).body;
    },
    async resume(instanceId) {
      return (await call<{ status: InstanceStatus }>("POST", `/instances/${enc(instanceId)}/resume`)).body;
    },
    async send(instanceId, channel, data = null, o = {}) {
      const r = await call<{ messageId: string }>("POST", `/instances/${enc(instanceId)}/messages`, { channel, data, ...(o.metadata ? { metadata: o.metadata } : {}) });
      return { messageId: r.body.messageId };
    },
    async publish(channel, data = null, o = {}) {
      const r = await call<{ messageId: string }>("POST", `/channels/${enc(channel)}/messages`, { data, ...(o.metadata ? { metadata: o.metadata } : {}) });
      return { messageId: r.body.messageId };
    },
    async sendEvent(e) {
      const event: Record<string, unknown> = {
        ...e.extensions,
        specversion: "1.0",
        id: e.id ?? crypto.randomUUID(),
        source: e.source,
        type: e.type,
        ...(e.subject !== undefined ? { subject: e.subject } : {}),
        ...(e.time !== undefined ? { time: iso(e.time) } : {}),
        ...(e.instanceId !== undefined ? { eddainstanceid: e.instanceId } : {}),
        ...(e.data !== undefined ? { datacontenttype: "application/json", data: e.data } : {}),
      };
      const r = await call<{ id: string; duplicate: boolean; messageId?: string; instanceId?: string }>("POST", "/events", event, { contentType: "application/cloudevents+json" });
      const { id, duplicate, messageId, instanceId } = r.body;
      return { id, duplicate, ...(messageId ? { messageId } : {}), ...(instanceId ? { instanceId } : {}) };
    },
    result: (instanceId, o) => result(instanceId, o),
    stream,
    async schedules() {
      return (await call<{ schedules: ScheduleView<WorkflowName<W>>[] }>("GET", "/schedules")).body.schedules;
    },
    async deadLetters(q = {}) {
      const params = new URLSearchParams();
      if (q.status) params.set("status", ([] as DeadLetterStatus[]).concat(q.status).join(","));
      if (q.type) params.set("type", q.type);
      if (q.limit !== undefined) params.set("limit", String(q.limit));
      if (q.cursor) params.set("cursor", q.cursor);
      if (q.include) params.set("include", q.include);
      const qs = params.toString();
      return (await call<{ events: DeadLetterView[]; nextCursor: string | null }>("GET", `/outbox/dead-letters${qs ? `?${qs}` : ""}`)).body;
    },
    async redeliverDeadLetter(eventId) {
      return (await call<{ status: "pending" }>("POST", `/outbox/dead-letters/${enc(eventId)}/redeliver`)).body;
    },
    async discardDeadLetter(eventId) {
      return (await call<{ discarded: true }>("POST", `/outbox/dead-letters/${enc(eventId)}/discard`)).body;
    },
  };
}
