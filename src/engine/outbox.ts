/**
 * Outbox relay: delivers the CloudEvents that steps wrote to `outbox_events`
 * (in the same transaction as their history) to the broker, as structured-mode
 * CloudEvents (`application/cloudevents+json`) POSTed to `brokerUrl`.
 *
 *   2xx                          → published
 *   4xx (but 408/429)            → invalid: the broker rejected it, retrying cannot help
 *   5xx, 408, 429, network error → failed, retry_count + 1, next attempt after an
 *                                  exponential backoff; later sweeps retry it
 *   older than maxAgeSeconds, or maxRetries attempts failed → expired
 *
 * Rows are claimed with SKIP LOCKED (and marked `processing` with a claim
 * timeout), so two relays never send the same row at once; a relay that dies
 * mid-send leaves the row to be re-claimed after the claim timeout. Delivery is
 * at-least-once: a crash between the broker's 2xx and the `published` mark
 * sends it again, with the same CloudEvents `id` for the broker to dedupe on.
 *
 * The relay runs right after the committing step (post-commit, for the rows
 * that step wrote) and in every sweep (for everything due).
 */
import { outgoingEvent, SPEC_VERSION, toJsonFormat, type CloudEventRecord } from "../core/cloudevent.ts";
import { fromJson } from "../core/serialization.ts";
import type { OutboxRecord } from "../storage/types.ts";
import { isSubrequestLimitError, type SubrequestBudget } from "./budget.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { OutboxOptions, Uses } from "./deps.ts";
import { isTransientFailure } from "./poison.ts";

export type { OutboxOptions } from "./deps.ts";

export interface RelayOptions {
  /** Only these rows (post-commit relay of one step's events). */
  eventIds?: string[];
  /** Keeps the relay alive after the response (Workers' `ctx.waitUntil`). */
  scope?: DispatchScope;
  /** Rows per claim (default 50). */
  batchSize?: number;
  /** Stop claiming new batches after this long (default 10 s). */
  budgetMs?: number;
}

export interface RelayReport {
  published: number;
  invalid: number;
  failed: number;
  expired: number;
  /** Claimed but not sent: the invocation hit its subrequest limit (no attempt counted). */
  deferred: number;
}

const SEND_CONCURRENCY = 6;

export function emptyRelayReport(): RelayReport {
  return { published: 0, invalid: 0, failed: 0, expired: 0, deferred: 0 };
}

/**
 * Relay due outbox rows (or just `eventIds`). Never rejects: a database or
 * broker failure is logged and left to the next sweep. With a scope, the work
 * is also registered with `scope.waitUntil`, so a caller may fire and forget.
 */
export function relayOutbox(deps: Uses<"outbox" | "storage">, opts: RelayOptions = {}): Promise<RelayReport> {
  const report = emptyRelayReport();
  const p = relay(deps, opts, report).then(
    () => report,
    (err: unknown) => {
      console.error("edda: outbox relay failed (the sweeper retries)", err);
      return report;
    },
  );
  opts.scope?.waitUntil?.(p);
  return p;
}

async function relay(deps: Uses<"outbox" | "storage">, opts: RelayOptions, report: RelayReport): Promise<void> {
  const cfg = deps.outbox;
  if (!cfg?.brokerUrl) return;
  const { storage } = deps;
  const started = Date.now();
  const batchSize = opts.batchSize ?? 50;
  const budgetMs = opts.budgetMs ?? 10_000;
  if (!opts.eventIds) report.expired += await storage.expireOutboxEvents(cfg.maxAgeSeconds ?? 86_400, cfg.maxRetries ?? 10);

  const subrequests = opts.scope?.budget;
  while (Date.now() - started < budgetMs) {
    // Claim no more rows than the invocation may still send: the rest stay due for a later one.
    const limit = Math.min(batchSize, subrequests?.remaining ?? batchSize);
    if (limit === 0) break;
    const rows = await storage.claimOutboxEvents(limit, opts.eventIds);
    for (let i = 0; i < rows.length; i += SEND_CONCURRENCY) {
      await Promise.all(rows.slice(i, i + SEND_CONCURRENCY).map((row) => deliverIsolated(deps, cfg, row, report, subrequests)));
    }
    if (opts.eventIds || rows.length < limit) break;
  }
}

/**
 * One row's delivery, isolated: an unexpected failure (its marking refused by
 * the database…) counts as a failed attempt with backoff, so the row ends
 * `expired` after `maxRetries` like any undeliverable event, and the other
 * rows of the batch are still delivered.
 */
async function deliverIsolated(deps: Uses<"storage">, cfg: OutboxOptions, row: OutboxRecord, report: RelayReport, subrequests?: SubrequestBudget): Promise<void> {
  try {
    await deliver(deps, cfg, row, report, subrequests);
  } catch (err) {
    if (isTransientFailure(err)) throw err;
    report.failed++;
    await deps.storage.markOutboxFailed(row.eventId, `relay failed: ${errorText(err)}`, Math.min(cfg.maxBackoffSeconds ?? 600, (cfg.initialBackoffSeconds ?? 2) * 2 ** row.retryCount));
  }
}

async function deliver(deps: Uses<"storage">, cfg: OutboxOptions, row: OutboxRecord, report: RelayReport, subrequests?: SubrequestBudget): Promise<void> {
  const { storage } = deps;
  let message: StructuredMessage;
  try {
    message = toStructuredMessage(row);
  } catch (err) {
    report.invalid++;
    return storage.markOutboxInvalid(row.eventId, `not a valid CloudEvent: ${errorText(err)}`);
  }
  // Another task of this invocation may have spent the budget since the claim.
  if (subrequests && !subrequests.take()) return storage.releaseOutboxClaim(row.eventId);
  const outcome = await postEvent(cfg.brokerUrl!, message, { ...(cfg.fetch ? { fetch: cfg.fetch } : {}), ...(cfg.timeoutMs ? { timeoutMs: cfg.timeoutMs } : {}) });
  if (!outcome.ok && outcome.limitReached) {
    // The platform refused to send it: not a delivery attempt, the broker never saw it.
    report.deferred++;
    return storage.releaseOutboxClaim(row.eventId);
  }
  if (outcome.ok) {
    report.published++;
    return storage.markOutboxPublished(row.eventId);
  }
  if (outcome.permanent) {
    report.invalid++;
    return storage.markOutboxInvalid(row.eventId, outcome.error);
  }
  report.failed++;
  const initial = cfg.initialBackoffSeconds ?? 2;
  const backoff = Math.min(cfg.maxBackoffSeconds ?? 600, initial * 2 ** row.retryCount);
  return storage.markOutboxFailed(row.eventId, outcome.error, backoff);
}

export interface StructuredMessage {
  headers: Record<string, string>;
  body: string;
}

/** A structured-mode CloudEvents HTTP message (JSON format; binary data as `data_base64`). */
export function structuredMessage(event: CloudEventRecord): StructuredMessage {
  return { headers: { "content-type": "application/cloudevents+json; charset=utf-8" }, body: toJsonFormat(event) };
}

/** The row as a structured-mode CloudEvents HTTP message. Throws InvalidCloudEventError when it is not a valid CloudEvent. */
export function toStructuredMessage(row: OutboxRecord): StructuredMessage {
  const { data } = row;
  const binary = data.type === "binary";
  const extensions = row.extensions ? (fromJson(row.extensions) as Record<string, unknown>) : {};
  const event = outgoingEvent(
    {
      ...extensions,
      specversion: SPEC_VERSION,
      id: row.eventId,
      type: row.eventType,
      source: row.eventSource,
      time: row.createdAt.toISOString(),
      datacontenttype: binary && row.contentType === "application/json" ? "application/octet-stream" : row.contentType,
    },
    data.type === "binary" ? data.bytes : fromJson(data.json),
  );
  return structuredMessage(event);
}

export type PostOutcome = { ok: true } | { ok: false; permanent: boolean; error: string; limitReached?: boolean };

/** POST one message to a broker; 5xx, 408, 429 and network errors are retryable, other 4xx permanent. */
export async function postEvent(brokerUrl: string, message: StructuredMessage, opts: { fetch?: typeof fetch; timeoutMs?: number } = {}): Promise<PostOutcome> {
  const fetchFn = opts.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  try {
    const res = await fetchFn(brokerUrl, {
      method: "POST",
      headers: message.headers,
      body: message.body,
      signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000),
    });
    const text = await res.text().catch(() => "");
    if (res.ok) return { ok: true };
    const error = `broker answered HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ""}`;
    const retryable = res.status >= 500 || res.status === 408 || res.status === 429;
    return { ok: false, permanent: !retryable, error };
  } catch (err) {
    return { ok: false, permanent: false, error: `broker unreachable: ${errorText(err)}`, ...(isSubrequestLimitError(err) ? { limitReached: true } : {}) };
  }
}

function errorText(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 500);
}

/** Post-commit: outbox rows were committed; relay them now rather than at the next sweep. */
export function notifyOutbox(deps: Uses<"outbox" | "storage">, eventIds: string[], scope?: DispatchScope): void {
  // relayOutbox never rejects and hands its work to scope.waitUntil itself.
  if (deps.outbox && eventIds.length > 0) void relayOutbox(deps, { eventIds, ...(scope ? { scope } : {}) });
}
