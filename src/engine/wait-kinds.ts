/**
 * Every kind of wait an operation can open, in one table.
 *
 * A wait is what a workflow blocks on between steps (`WaitRequest` in
 * core/replay.ts). Each kind answers the same five questions:
 *
 *   prepare   in the step, before it concludes: register the wait, or find
 *             its outcome already there (null when there is nothing to look
 *             at: the plan is pure and concludes with one statement);
 *   conclude  the waiting conclusion: status, what is registered with it,
 *             the in-process wake-up after the commit;
 *   expire    the sweep's (and `Engine.fireDueTimers`') path for waits that
 *             came due: record the expiry, return the instances it made
 *             runnable — one path, `expireDue`, for both callers;
 *   cancel    how ending the instance from outside (cancel, deadline)
 *             withdraws the wait (storage's `endInstance`, one statement);
 *   view      how operators see an instance in this wait (MCP, tracing).
 *
 * The table is a mapped type over the kinds of the keyed union (inngest-js's
 * `ExecutionResultHandlers` pattern): a new kind in `WaitRequest` does not
 * compile until its row here exists, with every handler.
 *
 * Race branches are waits of these kinds (core/race.ts: a message wait whose
 * timeout is the earliest timer, with a webhook branch's hook beside it; a
 * webhook wait with the earliest timer registered at its id; or a timer);
 * `waitEvent` is a message wait with `event: true`. Admission (flow
 * control's `queued`) holds an instance before its first step and is not a
 * wait an operation opens.
 */
import type { InstanceStatus, NewHistoryEvent } from "../core/model.ts";
import type { WaitRequest } from "../core/replay.ts";
import type { FailureTask, Storage, StepConclusion, TxStorage } from "../storage/types.ts";
import { prepareMessageWait } from "./channels.ts";
import { prepareChildWait } from "./lifecycle.ts";
import { prepareWebhookBranch } from "./webhook-waits.ts";
import { batchOrEach, type Isolation } from "./poison.ts";

export type WaitKind = WaitRequest["kind"];
export type WaitOf<K extends WaitKind> = Extract<WaitRequest, { kind: K }>;

/** What `prepare` found: the wait's outcome already there (recorded now, the run continues), or a wait to conclude with. */
export type Waiting = { kind: "waiting"; wakeInSeconds: number | null };
export type Prepared = { kind: "ready"; event: NewHistoryEvent } | Waiting;

/** The rows a waiting conclusion carries besides the wait's own (the run's recorded values and registrations). */
export type WaitingRows = Pick<StepConclusion, "history" | "compensations">;

export interface Expiry {
  /** The sweep task (and the failure counter of a poison row). */
  task: FailureTask & ("timers" | "message_timeouts" | "webhook_expiry");
  /** Record the due expiries (at most `limit`, or only `onlyInstanceId`'s); the instances made runnable. */
  expire(storage: Storage, limit: number, onlyInstanceId?: string): Promise<string[]>;
  /** The instances with a due expiry, for the one-at-a-time pass after a batch failed. */
  due(storage: Storage, limit: number): Promise<string[]>;
}

export interface WaitKindHandlers<K extends WaitKind> {
  /** The instance status while it waits. */
  status: InstanceStatus;
  prepare: ((tx: TxStorage, instanceId: string, w: WaitOf<K>, now: number) => Promise<Prepared>) | null;
  /** The waiting conclusion, given what `prepare` found (with no `prepare`: nothing), and when to wake in-process (null: never). */
  conclude(w: WaitOf<K>, rows: WaitingRows, waiting: Waiting, now: number): { conclusion: StepConclusion; wakeInSeconds: number | null };
  /** Null: the wait never comes due by itself (it ends when another instance records its outcome). */
  expire: Expiry | null;
  /** What withdraws the wait when the instance ends from outside (for the docs and the reader; the SQL is storage's). */
  cancel: string;
  view: {
    /** What an operator is told the instance does (MCP task status). */
    says: string;
    /** How long a client should wait before asking again (MCP). */
    pollIntervalMs: number;
    /** Whether a step that concludes in this wait gets an `edda.wait {kind}` span. */
    span: boolean;
  };
}

export type WaitKindTable = { [K in WaitKind]: WaitKindHandlers<K> };

/** A sweep task's expiry: its own statement, and the due instances of the same task for the one-at-a-time pass. */
const sweepExpiry = (task: Expiry["task"], expire: Expiry["expire"]): Expiry => ({
  task,
  expire,
  due: (storage, limit) => (task === "webhook_expiry" ? storage.findDueWebhookInstances(limit) : storage.findDueInstances(task, limit)),
});

const timerSeconds = (w: { delaySeconds?: number; expiresAt?: Date }, now: number) => (w.expiresAt ? Math.max(0, (w.expiresAt.getTime() - now) / 1000) : (w.delaySeconds ?? 0));
const earliest = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.min(a, b));

export const WAIT_KINDS: WaitKindTable = {
  timer: {
    status: "waiting_for_timer",
    prepare: null,
    conclude: (w, rows, _waiting, now) => ({
      conclusion: {
        status: "waiting_for_timer",
        currentActivityId: w.activityId,
        ...rows,
        timer: { timerId: w.activityId, activityId: w.activityId, ...(w.expiresAt ? { expiresAt: w.expiresAt } : { delaySeconds: w.delaySeconds ?? 0 }) },
      },
      wakeInSeconds: timerSeconds(w, now),
    }),
    expire: sweepExpiry("timers", (storage, limit, only) => storage.fireExpiredTimers(limit, only)),
    cancel: "the timer row is deleted with the instance's end (workflow_timer_subscriptions)",
    view: { says: "sleeping until a timer fires", pollIntervalMs: 5000, span: true },
  },
  message: {
    status: "waiting_for_message",
    prepare: async (tx, instanceId, w, now) => {
      // A race's webhook branch first (a POST that came before the race wins over a queued message), under the instance's row lock.
      const hook = w.hook ? await prepareWebhookBranch(tx, instanceId, w.hook, w.activityId, now) : null;
      if (hook?.kind === "ready") return hook;
      const r = await prepareMessageWait(tx, instanceId, w, now);
      return r.kind === "waiting" ? { kind: "waiting", wakeInSeconds: earliest(r.timeoutSeconds, hook?.wakeInSeconds ?? null) } : { kind: "ready", event: r.event };
    },
    // The receive's timeout, as prepare computed it from the database's clock (or a race's absolute time).
    conclude: (w, rows, waiting) => ({ conclusion: { status: "waiting_for_message", currentActivityId: w.activityId, ...rows }, wakeInSeconds: waiting.wakeInSeconds }),
    expire: sweepExpiry("message_timeouts", (storage, limit, only) => storage.expireMessageWaits(limit, only)),
    cancel: "the subscription's wait is cleared (kept while compensations run), else the subscription is deleted",
    view: { says: "waiting for a message", pollIntervalMs: 30_000, span: true },
  },
  child: {
    status: "waiting_for_child",
    prepare: async (tx, instanceId, w) => {
      const r = await prepareChildWait(tx, instanceId, w);
      return r.kind === "ready" ? r : { kind: "waiting", wakeInSeconds: null };
    },
    conclude: (w, rows) => ({ conclusion: { status: "waiting_for_child", currentActivityId: w.activityId, ...rows }, wakeInSeconds: null }),
    expire: null,
    cancel: "nothing to withdraw: the child's end finds the parent no longer waiting (its non-detached children end with it)",
    view: { says: "waiting for a child workflow", pollIntervalMs: 5000, span: false },
  },
  webhook: {
    status: "waiting_for_webhook",
    prepare: (tx, instanceId, w, now) => prepareWebhookBranch(tx, instanceId, w, w.activityId, now),
    // Woken in-process at the hook's expiry, as prepare read it from the database, or at a race's timer, registered with the wait.
    conclude: (w, rows, waiting, now) => ({
      conclusion: {
        status: "waiting_for_webhook",
        currentActivityId: w.activityId,
        ...rows,
        ...(w.timer ? { timer: { timerId: w.activityId, activityId: w.activityId, ...w.timer } } : {}),
      },
      wakeInSeconds: earliest(waiting.wakeInSeconds, w.timer ? timerSeconds(w.timer, now) : null),
    }),
    expire: sweepExpiry("webhook_expiry", (storage, limit, only) => storage.expireWaitWebhooks(limit, only)),
    cancel: "the instance's open hooks are cancelled (workflow_webhooks): a POST then answers 410; a race's timer row is deleted with the instance's end",
    view: { says: "waiting for a POST to its webhook URL", pollIntervalMs: 30_000, span: true },
  },
};

/** The row of a wait's kind (one cast, here, instead of one per caller). */
export function waitKind<K extends WaitKind>(w: WaitOf<K>): WaitKindHandlers<K> {
  return WAIT_KINDS[w.kind as K] as WaitKindHandlers<K>;
}

/** The kind whose waiting status this is, if any. */
export function waitKindOf(status: InstanceStatus): (WaitKindHandlers<WaitKind> & { kind: WaitKind }) | undefined {
  for (const [kind, handlers] of Object.entries(WAIT_KINDS) as [WaitKind, WaitKindHandlers<WaitKind>][]) {
    if (handlers.status === status) return { ...handlers, kind };
  }
  return undefined;
}

/** Each kind's expiry, in table order (the sweep runs one task per entry). */
export const EXPIRIES: readonly Expiry[] = (Object.values(WAIT_KINDS) as WaitKindHandlers<WaitKind>[]).flatMap((k) => (k.expire ? [k.expire] : []));

/**
 * One batch of a kind's due expiries, with poison isolation: a batch that
 * fails (not transiently) runs its instances one at a time, so one bad row
 * fails alone. The path the sweeper and `Engine.fireDueTimers` share.
 */
export function expireDue(iso: Isolation, expiry: Expiry, limit: number): Promise<string[]> {
  const { storage } = iso;
  return batchOrEach(
    iso,
    expiry.task,
    () => expiry.expire(storage, limit),
    () => expiry.due(storage, limit),
    (id) => expiry.expire(storage, limit, id),
  );
}
