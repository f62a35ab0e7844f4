/**
 * Why an instance is not moving, and what will move it (`GET /instances/:id/why`, the instance
 * view's `why`, the viewer's banner, `edda-edge why`, MCP). One read path: the instance row
 * decides the kind of reason (core/model.ts WHY_KINDS), and only the rows that kind needs are read
 * next — the wait's timer, subscription, hook or children, the flow-control key's holders and
 * queue, the failed attempt. Nothing here takes a lock or writes; each read is bounded.
 *
 * The order of the questions matters: a finished instance has no reason (`none`); a set-aside one
 * (`quarantined`, `parked`) waits for an operator or a deploy whatever else it has open; one whose
 * workflow this app does not register (`pinned`) is skipped by every step here; then a queued one
 * by its flow-control key, a runnable one by its lease, a waiting one by its wait kind's row below
 * (a mapped type over the declared kinds: a new kind fails to compile until it says why).
 */
import { sourceHash } from "./source-hashes.ts";
import { EV, WAIT_KINDS, waitKindOf, type WaitKind, type WhyKind } from "../core/model.ts";
import { fromPayload, fromJson } from "../core/serialization.ts";
import { resolveRetryPolicy } from "../core/retry.ts";
import type { InstanceRecord, RunsFor } from "../storage/types.ts";
import { versioningOf, type Versioning } from "./versioning.ts";
import type { Uses } from "./deps.ts";
import { sweepLock, type SweepTask } from "./sweeper.ts";
import { failureView } from "./views.ts";
import { historyBudget } from "./history-budget.ts";
import type { WhyReason, WhyReasonOf, WhyView } from "./why-view.ts";

export type { WhyFacts, WhyReason, WhyReasonOf, WhyView } from "./why-view.ts";

/** When a reason's stored text (an error message, a match) is cut: no answer grows with a stored value. */
const MAX_TEXT = 500;
/** Children, holders and queue entries named per reason. */
const MAX_NAMED = 10;

type WhyDeps = Uses<"storage" | "workflows" | "activities" | "dispatcher" | "retryPolicy" | "clock" | "sweepIntervalSeconds" | "cpuBudgetMs" | "runs">;

const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);
const cut = (text: string): string => (text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text);
const reason = <K extends WhyKind>(r: WhyReasonOf<K>): WhyReason => r as unknown as WhyReason;
/** "in 42 s" / "3 min ago", from the engine's clock (the database's is the truth; this is for a reader). */
function relative(at: Date, now: number): string {
  const ms = at.getTime() - now;
  const abs = Math.round(Math.abs(ms) / 1000);
  const span = abs < 120 ? `${abs} s` : abs < 7200 ? `${Math.round(abs / 60)} min` : abs < 172_800 ? `${Math.round(abs / 3600)} h` : `${Math.round(abs / 86_400)} d`;
  return ms >= 0 ? `in ${span}` : `${span} ago`;
}

/** Why `instanceId` is not moving; null when there is no such instance. */
export async function whyOf(e: WhyDeps, instanceId: string, depth = 0): Promise<WhyView | null> {
  const inst = await e.storage.getInstance(instanceId);
  if (!inst) return null;
  return { instanceId: inst.instanceId, status: inst.status, reason: await withHistoryBudget(e, inst, await reasonOf(e, inst, depth)) };
}

/**
 * The reason of an instance whose row is already read (the instance view); `historyBudget: false` leaves
 * out the history-size check (a list of instances, which would count each one's history).
 */
export async function reasonOfRecord(e: WhyDeps, inst: InstanceRecord, opts: { historyBudget?: boolean } = {}): Promise<WhyReason> {
  const r = await reasonOf(e, inst, 0);
  return opts.historyBudget === false ? r : withHistoryBudget(e, inst, r);
}

/** `r` with the warning when the instance's history nears what a cold step replays within the CPU budget (one count, only with a budget). */
async function withHistoryBudget(e: WhyDeps, inst: InstanceRecord, r: WhyReason): Promise<WhyReason> {
  if (e.cpuBudgetMs === null || r.kind === "none") return r;
  const budget = historyBudget(await e.storage.countHistory(inst.instanceId), e.cpuBudgetMs);
  return budget ? ({ ...r, historyBudget: budget } as WhyReason) : r;
}

async function reasonOf(e: WhyDeps, inst: InstanceRecord, depth: number): Promise<WhyReason> {
  const id = inst.instanceId;
  const since = iso(inst.updatedAt);
  switch (inst.status) {
    case "completed":
    case "failed":
    case "cancelled":
      return reason({ kind: "none", since, detail: `finished ${inst.status}`, next: `nothing: it has finished; rerun it (POST /instances/${id}/rerun) to run it again`, facts: { status: inst.status } });
    case "quarantined": {
      const f = failureView(inst.failureData);
      return reason({
        kind: "quarantined",
        since: f?.at || since,
        detail: f ? `set aside after ${f.attempts} failure(s) in a row of ${f.task}: ${f.errorType}: ${cut(f.message)}` : "set aside after repeated failures",
        next: `an operator: resume it once the cause is fixed (POST /instances/${id}/resume, back to ${f?.previousStatus ?? "its status"}), or cancel it`,
        facts: f ? { ...f, message: cut(f.message) } : { task: null },
      });
    }
    case "parked":
      return parked(e, inst);
    default:
      break;
  }
  const runs = await e.runs();
  const wf = e.workflows.get(inst.workflowName);
  if (!wf) {
    return reason({
      kind: "pinned",
      since,
      detail: `workflow "${inst.workflowName}" (code ${inst.sourceHash.slice(0, 12)}) is not registered in this app: every step here is skipped`,
      next: `deploy code that registers "${inst.workflowName}" (the sweep then resumes it), or cancel it`,
      facts: { workflowName: inst.workflowName, sourceHash: inst.sourceHash, deployment: inst.deployment, currentDeployment: runs.deployment, lastSeenAt: null, versioning: null, replayRefused: null },
    });
  }
  const live = inst.lockedBy !== null && (inst.lockExpiresAt === null || inst.lockExpiresAt.getTime() > e.clock());
  const elsewhere = live ? null : await onOtherDeployment(e, inst, runs);
  if (elsewhere && !elsewhere.served) return pinnedElsewhere(inst, runs.deployment, elsewhere, versioningOf(wf));
  const r = await reasonHere(e, inst, depth);
  // Its own deployment's engines run it: the reason is theirs to act on, and says where it runs.
  return elsewhere ? { ...r, detail: `${r.detail} (on deployment ${elsewhere.deployment}, whose engines run it: this deployment does not)` } : r;
}

async function reasonHere(e: WhyDeps, inst: InstanceRecord, depth: number): Promise<WhyReason> {
  const since = iso(inst.updatedAt);
  if (inst.status === "queued") return queued(e, inst);
  if (inst.status === "running" || inst.status === "compensating") return await runnable(e, inst);
  const declared = waitKindOf(inst.status);
  if (declared) return WAIT_REASONS[declared.kind](e, inst, depth);
  // A status this build does not know (a newer deploy wrote it): say so rather than guess.
  return reason({ kind: "none", since, detail: `status ${inst.status} is not known to this deployment`, next: "deploy the code that wrote this status", facts: { status: inst.status } });
}

/** An instance this deployment may not run (storage/versioning.ts `mayRun`, decided here from the same facts). */
interface Elsewhere {
  deployment: string;
  /** An engine of its deployment swept within SWEEP_OVERDUE_FACTOR cadences. */
  served: boolean;
  lastSeenAt: Date | null;
}

/** Null when this deployment may run it (its own, from before deployments, or an `auto` one it would move here). */
async function onOtherDeployment(e: WhyDeps, inst: InstanceRecord, runs: RunsFor): Promise<Elsewhere | null> {
  const d = inst.deployment;
  if (d === null || d === runs.deployment) return null;
  const [theirs, ours] = await Promise.all([e.storage.getDeployment(d), e.storage.getDeployment(runs.deployment)]);
  const movable = runs.autoWorkflows.includes(inst.workflowName) && inst.replayRefusedBy !== runs.deployment && !(ours !== null && theirs !== null && theirs.firstSeenAt >= ours.firstSeenAt);
  if (movable) return null;
  const lastSeenAt = theirs?.lastSeenAt ?? null;
  const window = SWEEP_OVERDUE_FACTOR * (e.sweepIntervalSeconds ?? DEFAULT_CADENCE_SECONDS) * 1000;
  return { deployment: d, lastSeenAt, served: lastSeenAt !== null && e.clock() - lastSeenAt.getTime() <= window };
}

/** When the app does not know its sweep cadence: the Workers cron's minute. */
const DEFAULT_CADENCE_SECONDS = 60;

function pinnedElsewhere(inst: InstanceRecord, current: string, where: Elsewhere, versioning: Versioning): WhyReason {
  const id = inst.instanceId;
  const seen = where.lastSeenAt ? `no engine of it has swept since ${where.lastSeenAt.toISOString()}` : "no engine of it has ever swept";
  const refused = inst.replayRefusedBy === current ? (inst.replayRefusedError ?? "its replay diverged") : null;
  const because = refused
    ? `this deployment's code (${current}) does not replay its history: ${cut(refused)}`
    : versioning === "pinned"
      ? `workflow "${inst.workflowName}" is pinned: it finishes on the deployment that started it`
      : `deployment ${current} is not newer than ${where.deployment}: it does not take its instances over`;
  return reason({
    kind: "pinned",
    since: iso(where.lastSeenAt ?? inst.updatedAt),
    blockedBy: [where.deployment],
    detail: `pinned to deployment ${where.deployment}, and ${seen}; ${because}`,
    next: `run an engine of deployment ${where.deployment} again (its sweep resumes it), or move it to this deployment once its replay passes here (POST /instances/${id}/upgrade, or a bulk upgrade); or cancel it`,
    facts: { workflowName: inst.workflowName, sourceHash: inst.sourceHash, deployment: where.deployment, currentDeployment: current, lastSeenAt: iso(where.lastSeenAt), versioning, replayRefused: refused === null ? null : cut(refused) },
  });
}

async function parked(e: WhyDeps, inst: InstanceRecord): Promise<WhyReason> {
  const wf = e.workflows.get(inst.workflowName);
  const deployedHash = wf ? await sourceHash(wf) : null;
  const err = inst.errorData ? (fromJson(inst.errorData) as { error_message?: unknown }) : null;
  const message = typeof err?.error_message === "string" ? cut(err.error_message) : "replay diverged from the recorded history";
  const changed = deployedHash !== null && deployedHash !== inst.parkedHash;
  return reason({
    kind: "parked",
    since: iso(inst.updatedAt),
    detail: `replay diverged at ${inst.currentActivityId ?? "its start"}: ${message}`,
    next: changed
      ? `the deployed code differs from the code that diverged: the next sweep resumes it (or POST /instances/${inst.instanceId}/resume now)`
      : `deploy code whose replay matches its history (the sweep then resumes it), or resume it after a fix that kept the hash (POST /instances/${inst.instanceId}/resume), or cancel it`,
    facts: { activityId: inst.currentActivityId, parkedHash: inst.parkedHash, deployedHash, error: message },
  });
}

/** A runnable instance: a step holds its lease, or the lease expired with its holder, or nobody took it yet. */
async function runnable(e: WhyDeps, inst: InstanceRecord): Promise<WhyReason> {
  const now = e.clock();
  const step = inst.currentActivityId ?? (inst.status === "compensating" ? "its compensations" : "its next step");
  if (inst.lockedBy !== null && (inst.lockExpiresAt === null || inst.lockExpiresAt.getTime() > now)) {
    return reason({
      kind: "running",
      since: iso(inst.lockedAt),
      ...(inst.lockExpiresAt ? { until: inst.lockExpiresAt.toISOString() } : {}),
      blockedBy: [inst.lockedBy],
      detail: `${inst.status === "compensating" ? "compensating" : "running"} ${step} on ${inst.lockedBy}${inst.lockedAt ? ` since ${relative(inst.lockedAt, now).replace(" ago", "")}` : ""}`,
      next: `its step concludes (the lease lasts until ${iso(inst.lockExpiresAt) ?? "its end"}); cancel it to stop it (the step then commits nothing)`,
      facts: { activityId: inst.currentActivityId, engine: inst.lockedBy, leaseExpiresAt: iso(inst.lockExpiresAt) },
    });
  }
  if (inst.lockedBy !== null) {
    const sweep = await lastSweep(e, "stale_leases");
    return reason({
      kind: "leased",
      since: iso(inst.lockExpiresAt),
      blockedBy: [inst.lockedBy],
      detail: `the lease of ${inst.lockedBy} on ${step} expired ${inst.lockExpiresAt ? relative(inst.lockExpiresAt, now) : ""} and nobody has taken it over (its engine died or stalled); ${sweep.clause}`.replace("  ", " "),
      next: "the sweep's stale-lease task releases it and resumes the instance at its next run (the cron, or POST /_edda/sweep); cancel it to stop it",
      facts: { engine: inst.lockedBy, expiredAt: iso(inst.lockExpiresAt), lastSweepAt: sweep.at, sweepOverdue: sweep.overdue },
    });
  }
  const sweep = await lastSweep(e, "resumable", (await e.runs()).deployment);
  return reason({
    kind: "dispatch_pending",
    since: iso(inst.updatedAt),
    detail: `ready to run ${step}, but no step has taken it: its follow-up was not delivered (or is still on its way); ${sweep.clause}`,
    next: "the next sweep dispatches it (runnable instances idle for 2 s are resumed); cancel it to stop it",
    facts: { idleSince: inst.updatedAt.toISOString(), lastSweepAt: sweep.at, sweepOverdue: sweep.overdue },
  });
}

/** A sweep task that has not run for this many times the expected cadence is overdue (a Workers CPU budget may defer a task a few ticks). */
export const SWEEP_OVERDUE_FACTOR = 5;

/** Whether a sweep task last taken at `at` is overdue by the app's expected cadence (null: unknown, never overdue). */
export function sweepOverdue(at: Date | null, now: number, intervalSeconds: number | null): boolean {
  if (intervalSeconds === null || intervalSeconds <= 0) return false;
  return at === null || now - at.getTime() > SWEEP_OVERDUE_FACTOR * intervalSeconds * 1000;
}

/** When the sweep task that moves an instance last ran, and a clause saying so (a sweep that never ran is the commonest stall). */
async function lastSweep(e: WhyDeps, task: SweepTask, deployment?: string): Promise<{ at: string | null; clause: string; overdue: boolean }> {
  const at = await e.storage.systemLockLastTaken(sweepLock(task, deployment));
  const overdue = sweepOverdue(at, e.clock(), e.sweepIntervalSeconds);
  const expected = e.sweepIntervalSeconds ? ` — overdue: sweeps are expected every ${e.sweepIntervalSeconds} s (on Workers: is the cron trigger still configured? on Node: has the sweeper stopped?)` : "";
  if (!at) return { at: null, overdue, clause: `no sweep has run its ${task} task yet (on Workers: is a cron trigger configured? on Node: is the sweeper on?)` };
  return { at: at.toISOString(), overdue, clause: `the sweep's ${task} task last ran ${relative(at, e.clock())}${overdue ? expected : ""}` };
}

const bare = (inst: InstanceRecord, key: string): string => key.slice(inst.workflowName.length + 1);

/** A `queued` instance: debounced, waiting for a rate window, or for a concurrency slot. */
async function queued(e: WhyDeps, inst: InstanceRecord): Promise<WhyReason> {
  const now = e.clock();
  const options = e.workflows.get(inst.workflowName)?.options;
  const since = iso(inst.startedAt);
  if (inst.debounceKey !== null) {
    const key = bare(inst, inst.debounceKey);
    return reason({
      kind: "debounce",
      since,
      ...(inst.notBefore ? { until: inst.notBefore.toISOString() } : {}),
      blockedBy: [key],
      detail: `debounced on key "${key}": starts once the key is quiet${inst.notBefore ? `, at ${inst.notBefore.toISOString()} (${relative(inst.notBefore, now)})` : ""}`,
      next: "it starts at `until` (a wake-up or the next sweep) unless another start of its key pushes it back (taking that start's input); cancel it to drop it",
      facts: { key, notBefore: iso(inst.notBefore) },
    });
  }
  if (inst.rateKey !== null && inst.admittedAt === null) {
    const rl = options?.rateLimit;
    const key = bare(inst, inst.rateKey);
    const peers = await e.storage.flowKeyPeers("rate", inst.rateKey, inst.instanceId, { limit: Math.min(rl?.limit ?? MAX_NAMED, 1000), periodSeconds: rl?.periodSeconds ?? 0 });
    // The window has room again when its `limit`-th newest admission leaves it.
    const edge = rl && peers.holders.length >= rl.limit ? peers.holders[rl.limit - 1]?.admittedAt : null;
    const opens = edge && rl ? new Date(edge.getTime() + rl.periodSeconds * 1000) : null;
    const ahead = peers.aheadCount;
    return reason({
      kind: "rate_limit",
      since,
      ...(opens ? { until: opens.toISOString() } : {}),
      blockedBy: [...peers.ahead, ...(ahead === 0 ? peers.holders.slice(0, MAX_NAMED).map((h) => h.instanceId) : [])].slice(0, MAX_NAMED),
      detail: `rate-limited on key "${key}": ${peers.holders.length} admitted in the last ${rl?.periodSeconds ?? "?"} s (limit ${rl?.limit ?? "?"}), ${ahead} queued before it${opens ? `; the window has room ${relative(opens, now)}` : "; the window has room now"}`,
      next: `it leaves the queue when the window has room${opens ? ` (${opens.toISOString()})` : ""} and the ${ahead} before it have left (a wake-up or the next sweep admits it); cancel it to leave the queue`,
      facts: { key, limit: rl?.limit ?? null, periodSeconds: rl?.periodSeconds ?? null, admittedInWindow: peers.holders.length, ahead },
    });
  }
  const key = inst.concurrencyKey === null ? null : bare(inst, inst.concurrencyKey);
  const limit = options?.concurrency?.limit ?? null;
  const peers = inst.concurrencyKey === null ? { holders: [], ahead: [], aheadCount: 0 } : await e.storage.flowKeyPeers("concurrency", inst.concurrencyKey, inst.instanceId, { limit: MAX_NAMED });
  const holders = peers.holders.map((h) => h.instanceId);
  const ahead = peers.aheadCount;
  return reason({
    kind: "concurrency",
    since,
    blockedBy: [...holders, ...peers.ahead].slice(0, MAX_NAMED),
    detail: `queued on concurrency key "${key ?? "?"}" (limit ${limit ?? "?"}): held by ${holders.length ? holders.join(", ") : "nobody"}${ahead ? `, ${ahead} queued before it` : ""}`,
    next:
      holders.length >= (limit ?? 1)
        ? `a slot frees when ${holders.length === 1 ? holders[0] : "one of its holders"} ends${ahead ? ` and the ${ahead} before it have started` : ""}; cancel a holder to free its slot, or cancel this instance to leave the queue`
        : "a slot is free: the next sweep promotes it (its concurrency task); cancel it to leave the queue",
    facts: { key: key ?? "", limit, holders, ahead },
  });
}

type WaitReason = (e: WhyDeps, inst: InstanceRecord, depth: number) => Promise<WhyReason>;

/** Each wait kind's reason, with its declared `next` (core/model.ts): a mapped type, so a new kind must say why. */
const WAIT_REASONS: { [K in WaitKind]: WaitReason } = {
  async timer(e, inst) {
    const now = e.clock();
    const timers = await e.storage.listTimers(inst.instanceId);
    const t = timers[0];
    const retry = t ? /^(.*)#retry(\d+)$/.exec(t.timerId) : null;
    if (t && retry) return retryBackoff(e, inst, retry[1]!, Number(retry[2]), t.expiresAt);
    const wake = typeof e.dispatcher.wakeIn === "function";
    const sweep = await lastSweep(e, "timers");
    return reason({
      kind: "timer",
      since: iso(inst.updatedAt),
      ...(t ? { until: t.expiresAt.toISOString() } : {}),
      detail: t
        ? `sleeping at ${t.activityId} until ${t.expiresAt.toISOString()} (${relative(t.expiresAt, now)}); fired by ${wake ? "this app's dispatcher wake-up or " : ""}the sweep (${sweep.clause})`
        : "waiting for a timer, but none is registered (the sweep's stale checks will find it)",
      next: WAIT_KINDS.timer.why.next,
      facts: { timerId: t?.timerId ?? "", activityId: t?.activityId ?? "", dispatcherWakeUp: wake, lastSweepAt: sweep.at, sweepOverdue: sweep.overdue },
    });
  },

  async message(e, inst) {
    const now = e.clock();
    const waits = await e.storage.channelWaits(inst.instanceId);
    const w = waits[0];
    const until = w?.timeoutAt ? { until: w.timeoutAt.toISOString() } : {};
    const last = w?.lastMessage ? { messageId: w.lastMessage.messageId, publishedAt: w.lastMessage.publishedAt.toISOString() } : null;
    const timeout = w?.timeoutAt ? `; times out ${relative(w.timeoutAt, now)}` : "";
    const seen = w?.lastMessage ? `the latest it could see: ${w.lastMessage.messageId} (${relative(w.lastMessage.publishedAt, now)})` : "none seen yet";
    // An event wait (waitEvent) subscribes with a lookback, or waits with a match.
    if (w && (w.lookbackFrom !== null || w.match !== null)) {
      const matchText = w.match === null ? "" : JSON.stringify(w.match);
      const match = matchText.length <= MAX_TEXT ? w.match : null;
      return reason({
        kind: "event",
        since: iso(inst.updatedAt),
        ...until,
        detail: `waiting for a "${w.channel}" event${matchText ? ` matching ${cut(matchText)}` : ""} at ${w.activityId}${timeout}; ${seen.replace("the latest it could see", "the latest on the channel")}`,
        next: `a matching "${w.channel}" CloudEvent (POST /events), or its timeout; cancel it to stop waiting`,
        facts: { type: w.channel, activityId: w.activityId, match, timeoutAt: iso(w.timeoutAt), lastEvent: last },
      });
    }
    return reason({
      kind: "message",
      since: iso(inst.updatedAt),
      ...until,
      detail: w ? `waiting for a message on "${w.channel}" (${w.mode}) at ${w.activityId}${timeout}; ${seen}` : "waiting for a message (no open subscription found: the sweep delivers or expires it)",
      next: WAIT_KINDS.message.why.next.replace("{id}", inst.instanceId),
      facts: { channel: w?.channel ?? "", mode: w?.mode ?? "", activityId: w?.activityId ?? "", timeoutAt: iso(w?.timeoutAt), lastMessage: last },
    });
  },

  async child(e, inst, depth) {
    const children = (await e.storage.listChildren(inst.instanceId, 100)).filter((c) => c.status !== "completed" && c.status !== "failed" && c.status !== "cancelled");
    // The child this wait is for has the parent's operation as its parent_activity_id.
    const records = await Promise.all(children.slice(0, MAX_NAMED).map((c) => e.storage.getInstance(c.instanceId)));
    const waitedFor = records.filter((r): r is InstanceRecord => r !== null && (r.parentActivityId === null || r.parentActivityId === inst.currentActivityId));
    const named = waitedFor.length ? waitedFor : records.filter((r): r is InstanceRecord => r !== null);
    const whys = depth === 0 ? await Promise.all(named.map((c) => reasonOf(e, c, depth + 1))) : [];
    const list = named.map((c, i) => ({ instanceId: c.instanceId, workflowName: c.workflowName, status: c.status, why: whys[i] ? { kind: whys[i].kind, detail: whys[i].detail } : null }));
    return reason({
      kind: "child",
      since: iso(inst.updatedAt),
      blockedBy: list.map((c) => c.instanceId),
      detail: list.length
        ? `waiting at ${inst.currentActivityId ?? "invoke"} for ${list.map((c) => `${c.instanceId} (${c.workflowName}, ${c.why ? `${c.why.kind}: ${c.why.detail}` : c.status})`).join("; ")}`
        : `waiting at ${inst.currentActivityId ?? "invoke"} for a child that has already ended (its outcome is being recorded)`,
      next: WAIT_KINDS.child.why.next,
      facts: { activityId: inst.currentActivityId, children: list },
    });
  },

  async webhook(e, inst) {
    const now = e.clock();
    const hooks = (await e.storage.listWaitWebhooks(inst.instanceId, 100)).filter((h) => h.status === "open" && h.run === inst.run);
    const h = hooks.find((x) => x.waitId === inst.currentActivityId) ?? hooks[0];
    return reason({
      kind: "webhook",
      since: iso(inst.updatedAt),
      ...(h?.expiresAt ? { until: h.expiresAt.toISOString() } : {}),
      detail: h ? `waiting for a POST to the URL of ${h.hookId}${h.expiresAt ? `; it expires ${relative(h.expiresAt, now)} (${h.expiresAt.toISOString()})` : " (it never expires)"}` : "waiting for a webhook POST (no open hook found)",
      next: WAIT_KINDS.webhook.why.next,
      facts: { hookId: h?.hookId ?? null, waitId: h?.waitId ?? null, expiresAt: iso(h?.expiresAt) },
    });
  },
};

/** A timer that schedules an activity's next attempt: which attempt, of how many, after which error. */
async function retryBackoff(e: WhyDeps, inst: InstanceRecord, activityId: string, attempt: number, at: Date): Promise<WhyReason> {
  const rec = await e.storage.historyRecord(inst.instanceId, `${activityId}#${attempt}`);
  const data = rec && rec.eventType === EV.ActivityAttemptFailed ? (fromPayload(rec.data) as { name?: unknown; error?: { name?: unknown; message?: unknown } }) : null;
  const name = typeof data?.name === "string" ? data.name : null;
  const def = name ? e.activities.find(name) : undefined;
  const maxAttempts = def ? resolveRetryPolicy(def.options.retry, e.retryPolicy).maxAttempts : null;
  const sweep = await lastSweep(e, "timers");
  const lastError = data?.error ? { type: String(data.error.name ?? "Error"), message: cut(String(data.error.message ?? "")) } : null;
  return reason({
    kind: "retry_backoff",
    since: iso(rec?.createdAt ?? inst.updatedAt),
    until: at.toISOString(),
    detail: `attempt ${attempt}${maxAttempts ? ` of ${maxAttempts}` : ""} of ${name ?? activityId} failed${lastError ? ` (${lastError.type}: ${lastError.message})` : ""}; attempt ${attempt + 1} ${relative(at, e.clock())}`,
    next: `attempt ${attempt + 1} runs at ${at.toISOString()} (its retry timer); cancel it to stop retrying`,
    facts: { activityId, activityName: name, attempt, maxAttempts, lastError, nextAttemptAt: at.toISOString(), lastSweepAt: sweep.at, sweepOverdue: sweep.overdue },
  });
}
