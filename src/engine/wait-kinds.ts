/**
 * What the engine does with each kind of wait, in one table.
 *
 * A wait is what a workflow blocks on between steps (`WaitRequest` in
 * core/replay.ts). Its kind is declared once in core/model.ts (`WAIT_KINDS`:
 * status, records, expiry task and counter, view); this table is a mapped
 * type over those kinds and answers, for each, the engine's four questions:
 *
 *   prepare   in the step, before it concludes: register the wait, or find
 *             its outcome already there (null when there is nothing to look
 *             at: the plan is pure and concludes with one statement);
 *   conclude  the waiting conclusion: status, what is registered with it,
 *             the in-process wake-up after the commit;
 *   expire    the sweep's (and `Engine.fireDueTimers`') path for waits that
 *             came due: record the expiry, return the instances it made
 *             runnable — one path, `expireDue`, for both callers; present
 *             exactly when the kind declares an expiry (checked by the type);
 *   cancel    how ending the instance from outside (cancel, deadline)
 *             withdraws the wait (storage's `endInstance`, one statement).
 *
 * A new kind declared in the model does not compile until its row here
 * exists, with every handler (inngest-js's `ExecutionResultHandlers` pattern).
 *
 * Race branches are waits of these kinds (core/race.ts: a message wait whose
 * timeout is the earliest timer, with a webhook branch's hook beside it; a
 * webhook wait with the earliest timer registered at its id; or a timer);
 * `waitEvent` is a message wait with `event: true`. Admission (flow
 * control's `queued`) holds an instance before its first step and is not a
 * wait an operation opens.
 */
import { WAIT_KINDS, type ExpiryCounter, type ExpiryTask, type NewHistoryEvent, type WaitKind, type WaitKindDeclaration, type WaitStatus } from "../core/model.ts";
import type { WaitRequest } from "../core/replay.ts";
import type { Storage, StepConclusion, TxStorage } from "../storage/types.ts";
import { prepareMessageWait } from "./channels.ts";
import { prepareChildWait } from "./lifecycle.ts";
import { prepareWebhookBranch } from "./webhook-waits.ts";
import { batchOrEach, type Isolation } from "./poison.ts";

export type { WaitKind };
export type WaitOf<K extends WaitKind> = Extract<WaitRequest, { kind: K }>;

// The kinds a WaitRequest can have are exactly the declared ones: a kind declared without its request, or a request of an undeclared kind, fails here.
const _requestsAreDeclaredKinds: [WaitRequest["kind"], WaitKind] extends [WaitKind, WaitRequest["kind"]] ? true : never = true;

/** What `prepare` found: the wait's outcome already there (recorded now, the run continues), or a wait to conclude with. */
export type Waiting = { kind: "waiting"; wakeInSeconds: number | null };
export type Prepared = { kind: "ready"; event: NewHistoryEvent } | Waiting;

/** The rows a waiting conclusion carries besides the wait's own (the run's recorded values and registrations). */
export type WaitingRows = Pick<StepConclusion, "history" | "compensations">;

export interface Expiry {
  /** The sweep task (and the failure task of a poison row), as the kind declares it. */
  task: ExpiryTask;
  /** The sweep report's counter of what it expired. */
  counter: ExpiryCounter;
  /** Whether it runs first in a sweep with a CPU budget. */
  priority: boolean;
  /** Record the due expiries (at most `limit`, or only `onlyInstanceId`'s); the instances made runnable. */
  expire(storage: Storage, limit: number, onlyInstanceId?: string): Promise<string[]>;
  /** The instances with a due expiry, for the one-at-a-time pass after a batch failed. */
  due(storage: Storage, limit: number): Promise<string[]>;
}

/** The expiry handlers of a kind that declares an expiry; null for one that does not. */
type ExpiryHandlers<K extends WaitKind> = (typeof WAIT_KINDS)[K]["expiry"] extends null ? null : Pick<Expiry, "expire" | "due">;

export interface WaitKindHandlers<K extends WaitKind> {
  prepare: ((tx: TxStorage, instanceId: string, w: WaitOf<K>, now: number) => Promise<Prepared>) | null;
  /** The waiting conclusion, given what `prepare` found (with no `prepare`: nothing), and when to wake in-process (null: never). */
  conclude(w: WaitOf<K>, rows: WaitingRows, waiting: Waiting, now: number): { conclusion: StepConclusion; wakeInSeconds: number | null };
  /** How the kind's due waits are recorded and found (its SQL is storage's); null exactly when the kind declares no expiry. */
  expire: ExpiryHandlers<K>;
  /** What withdraws the wait when the instance ends from outside (for the docs and the reader; the SQL is storage's). */
  cancel: string;
}

export type WaitKindTable = { [K in WaitKind]: WaitKindHandlers<K> };

/** The waiting status of a kind, as declared. */
const statusOf = (kind: WaitKind): WaitStatus => WAIT_KINDS[kind].status;

const timerSeconds = (w: { delaySeconds?: number; expiresAt?: Date }, now: number) => (w.expiresAt ? Math.max(0, (w.expiresAt.getTime() - now) / 1000) : (w.delaySeconds ?? 0));
const earliest = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.min(a, b));

export const WAIT_HANDLERS: WaitKindTable = {
  timer: {
    prepare: null,
    conclude: (w, rows, _waiting, now) => ({
      conclusion: {
        status: statusOf("timer"),
        currentActivityId: w.activityId,
        ...rows,
        timer: { timerId: w.activityId, activityId: w.activityId, ...(w.expiresAt ? { expiresAt: w.expiresAt } : { delaySeconds: w.delaySeconds ?? 0 }) },
      },
      wakeInSeconds: timerSeconds(w, now),
    }),
    expire: { expire: (storage, limit, only) => storage.fireExpiredTimers(limit, only), due: (storage, limit) => storage.findDueInstances("timers", limit) },
    cancel: "the timer row is deleted with the instance's end (workflow_timer_subscriptions)",
  },
  message: {
    prepare: async (tx, instanceId, w, now) => {
      // A race's webhook branch first (a POST that came before the race wins over a queued message), under the instance's row lock.
      const hook = w.hook ? await prepareWebhookBranch(tx, instanceId, w.hook, w.activityId, now) : null;
      if (hook?.kind === "ready") return hook;
      const r = await prepareMessageWait(tx, instanceId, w, now);
      return r.kind === "waiting" ? { kind: "waiting", wakeInSeconds: earliest(r.timeoutSeconds, hook?.wakeInSeconds ?? null) } : { kind: "ready", event: r.event };
    },
    // The receive's timeout, as prepare computed it from the database's clock (or a race's absolute time).
    conclude: (w, rows, waiting) => ({ conclusion: { status: statusOf("message"), currentActivityId: w.activityId, ...rows }, wakeInSeconds: waiting.wakeInSeconds }),
    expire: { expire: (storage, limit, only) => storage.expireMessageWaits(limit, only), due: (storage, limit) => storage.findDueInstances("message_timeouts", limit) },
    cancel: "the subscription's wait is cleared (kept while compensations run), else the subscription is deleted",
  },
  child: {
    prepare: async (tx, instanceId, w) => {
      const r = await prepareChildWait(tx, instanceId, w);
      return r.kind === "ready" ? r : { kind: "waiting", wakeInSeconds: null };
    },
    conclude: (w, rows) => ({ conclusion: { status: statusOf("child"), currentActivityId: w.activityId, ...rows }, wakeInSeconds: null }),
    expire: null,
    cancel: "nothing to withdraw: the child's end finds the parent no longer waiting (its non-detached children end with it)",
  },
  webhook: {
    prepare: (tx, instanceId, w, now) => prepareWebhookBranch(tx, instanceId, w, w.activityId, now),
    // Woken in-process at the hook's expiry, as prepare read it from the database, or at a race's timer, registered with the wait.
    conclude: (w, rows, waiting, now) => ({
      conclusion: {
        status: statusOf("webhook"),
        currentActivityId: w.activityId,
        ...rows,
        ...(w.timer ? { timer: { timerId: w.activityId, activityId: w.activityId, ...w.timer } } : {}),
      },
      wakeInSeconds: earliest(waiting.wakeInSeconds, w.timer ? timerSeconds(w.timer, now) : null),
    }),
    expire: { expire: (storage, limit, only) => storage.expireWaitWebhooks(limit, only), due: (storage, limit) => storage.findDueWebhookInstances(limit) },
    cancel: "the instance's open hooks are cancelled (workflow_webhooks): a POST then answers 410; a race's timer row is deleted with the instance's end",
  },
};

/** The row of a wait's kind (one cast, here, instead of one per caller). */
export function waitKind<K extends WaitKind>(w: WaitOf<K>): WaitKindHandlers<K> {
  return WAIT_HANDLERS[w.kind as K] as WaitKindHandlers<K>;
}

/** Each kind's expiry, in table order (the sweep runs one task per entry): the declared task and counter with the row's handlers. */
export const EXPIRIES: readonly Expiry[] = (Object.keys(WAIT_KINDS) as WaitKind[]).flatMap((kind) => {
  const declared: WaitKindDeclaration["expiry"] = WAIT_KINDS[kind].expiry;
  const handlers = WAIT_HANDLERS[kind].expire as Pick<Expiry, "expire" | "due"> | null;
  return declared && handlers ? [{ ...(declared as Pick<Expiry, "task" | "counter" | "priority">), ...handlers }] : [];
});

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
