/**
 * What the operator surfaces (viewer, API, MCP, health probes) read: one
 * named query each, so `http/` talks to the engine and never to storage.
 * Each function names the parts it uses (deps.ts).
 */
import type { InstanceFilter, ListInstancesQuery } from "../storage/types.ts";
import type { Uses } from "./deps.ts";
import { SWEEP_LOCK_PREFIX } from "./sweeper.ts";

/** One page of instances matching `query` (an InvalidArgumentError for a stale cursor). */
export function listInstances(e: Uses<"storage">, query: ListInstancesQuery) {
  return e.storage.listInstances(query);
}

/** How many instances match `filter`, per status. */
export function countInstances(e: Uses<"storage">, filter: InstanceFilter) {
  return e.storage.countInstancesByStatus(filter);
}

/** The stored record of one instance, or null. */
export function instanceRecord(e: Uses<"storage">, instanceId: string) {
  return e.storage.getInstance(instanceId);
}

/** Whether an instance with this id exists. */
export async function instanceExists(e: Uses<"storage">, instanceId: string): Promise<boolean> {
  return (await e.storage.getInstance(instanceId)) !== null;
}

/** A bounded page of an instance's history (payloads cut at `maxChars`). */
export function historyPreview(e: Uses<"storage">, instanceId: string, opts: { afterId: number; limit: number; maxChars: number; run?: number }) {
  return e.storage.loadHistoryPreview(instanceId, opts);
}

/** All of an instance's history events. */
export function historyEvents(e: Uses<"storage">, instanceId: string) {
  return e.storage.loadHistory(instanceId);
}

/** Everything the viewer's instance page shows beside its history, or null when there is no such instance. */
export async function instanceInspection(e: Uses<"storage">, instanceId: string, opts: { historyAfter: number; run: number; limit: number; maxChars: number }) {
  const s = e.storage;
  const inst = await s.getInstance(instanceId);
  if (!inst) return null;
  const [page, timers, subscriptions, groups, compensations, runs, children, webhooks] = await Promise.all([
    s.loadHistoryPreview(instanceId, { afterId: opts.historyAfter, limit: opts.limit, maxChars: opts.maxChars }),
    s.listTimers(instanceId),
    s.listSubscriptions(instanceId),
    s.listGroups(instanceId),
    s.listCompensations(instanceId),
    s.listArchivedRuns(instanceId),
    s.listChildren(instanceId, 100),
    s.listWaitWebhooks(instanceId, 100),
  ]);
  // Each compensation's state needs only the event rows, never their payloads.
  const compensationEvents = compensations.length ? (await s.loadHistoryPreview(instanceId, { afterId: 0, limit: 10_000, maxChars: 0 })).events.filter((ev) => ev.activityId.startsWith("compensate:")) : [];
  const archived = Number.isInteger(opts.run) && runs.some((r) => r.run === opts.run) ? { run: opts.run, history: (await s.loadHistoryPreview(instanceId, { afterId: 0, limit: opts.limit, maxChars: opts.maxChars, run: opts.run })).events } : null;
  return { inst, page, timers, subscriptions, groups, compensations, runs, children, webhooks, compensationEvents, archived };
}

/** The busiest channels, with their subscriber and pending-message counts. */
export function channelOverview(e: Uses<"storage">, limit: number) {
  return e.storage.channelOverview(limit);
}

/** One channel's subscribers and its pending messages. */
export async function channelDetail(e: Uses<"storage">, channel: string, limits: { subscribers: number; pending: number }) {
  const [subscribers, pending] = await Promise.all([e.storage.channelSubscribers(channel, limits.subscribers), e.storage.pendingMessages(channel, limits.pending)]);
  return { subscribers, pending };
}

/** A read that reaches the database (throws when it is unreachable). */
export async function checkReadable(e: Uses<"storage">): Promise<void> {
  await e.storage.getInstance("__healthz__");
}

/** A real write through the engine's own path: the same upsert the sweep's lock takes, then released. */
export async function checkWritable(e: Uses<"storage">, lock: string, holder: string): Promise<void> {
  if (await e.storage.tryAcquireSystemLock(lock, holder, 5)) await e.storage.releaseSystemLock(lock, holder);
}

/** Runnable instances whose lease expired and that nobody has taken over (readiness detail). */
export function expiredLeases(e: Uses<"storage">) {
  return e.storage.expiredLeases();
}

/** When any sweep task last ran (its system lock's `locked_at`), or null: no sweep has run against this database. */
export function lastSweepAt(e: Uses<"storage">) {
  return e.storage.systemLockLastTaken(SWEEP_LOCK_PREFIX, { prefix: true });
}

/** End a viewer session server-side: its id is refused until `expiresAt`, when its cookie expires anyway. */
export function revokeViewerSession(e: Uses<"storage">, sessionId: string, expiresAt: Date): Promise<void> {
  return e.storage.revokeViewerSession(sessionId, expiresAt);
}

/** Whether a viewer session was ended by logging out. */
export function viewerSessionRevoked(e: Uses<"storage">, sessionId: string): Promise<boolean> {
  return e.storage.viewerSessionRevoked(sessionId);
}

/** Received CloudEvents, newest first, each with the instances it started or that took its message (storage/received-events.ts). */
export function receivedEvents(e: Uses<"storage">, limit: number, before?: { receivedAt: string; source: string; id: string }) {
  return e.storage.listReceivedEvents(limit, before);
}
