/**
 * Wait for the first of several: `race(ctx, { reply: onMessage("response"),
 * late: onTimer(60) })` resolves with `{ winner: "reply", value }`.
 *
 * A race is ONE operation (`race:n`) with ONE history record: whichever
 * branch's record lands first at that id is the winner, and replay returns the
 * same winner because it reads the same record. The database arbitrates, and
 * a race compiles to one wait of the kinds in engine/wait-kinds.ts:
 *
 *   message (+ webhook) (+ timers)  a `message` wait whose timeout is the
 *                                   earliest timer, with the hook beside it;
 *   webhook (+ timers)              a `webhook` wait with the earliest timer
 *                                   registered at the race's id;
 *   timers                          a `timer` wait on the earliest.
 *
 * Whoever records at the race's id does it under the instance's row lock and
 * only while the instance still waits there, so exactly one branch records.
 * The losers are withdrawn by construction: no other timer row is ever
 * registered; a message that did not win was never taken from its channel —
 * the next receive gets it; a POST that did not win was never accepted — the
 * hook answers 410 (`lost`) once another branch decided, and a later wait on
 * it gets `WebhookExpiredError`.
 *
 * Branches: timers (`onTimer`, `onTimerUntil`; relative or absolute, not both in
 * one race, so "earliest" never depends on when the race is replayed), at most
 * one message branch (`onMessage` = receive/waitMessage, `onEvent` = waitEvent),
 * at most one webhook branch (`onWebhook(hook)`: a hook `createWebhook` made in
 * this run; its own expiry ends the race with WebhookExpiredError, as
 * `hook.wait()` would). Branch order is the object's key order; ties between
 * timers go to the first; when the race begins with both a POST that came
 * before it and a queued message, the POST wins.
 */
import type { z } from "zod";
import type { WorkflowContext } from "./context.ts";
import { EV, type ChannelMode, type HistoryEvent } from "./model.ts";
import { operation, operationId } from "./operation.ts";
import type { Decoded, WaitRequest } from "./replay.ts";
import { normalizeMatch, type EventMatch, type MatchDocument } from "./match.ts";
import { decodeMessageRecord, checkChannel, toChannelMessage, toReceivedEvent, type ChannelMessage, type ReceivedEvent, type RecordedMessage } from "./waits.ts";
import { decodeWebhookRecord, type WaitWebhook, type WebhookDelivery } from "./webhook-waits.ts";

declare const VALUE: unique symbol;

export type RaceBranch<T> = (
  | { kind: "timer"; seconds: number }
  | { kind: "timer_until"; until: Date }
  | { kind: "message"; channel: string; subscribeAs: ChannelMode; event: boolean; schema?: z.ZodType; match?: MatchDocument }
  | { kind: "webhook"; hookId: string }
) & { readonly [VALUE]?: T };

/** A timer branch: fires `seconds` after the race first runs. */
export function onTimer(seconds: number): RaceBranch<void> {
  if (!(Number.isFinite(seconds) && seconds >= 0)) throw new TypeError(`onTimer: seconds must be a finite number ≥ 0, got ${seconds}`);
  return { kind: "timer", seconds };
}

/** A timer branch firing at `until`. */
export function onTimerUntil(until: Date): RaceBranch<void> {
  if (!(until instanceof Date) || Number.isNaN(until.getTime())) throw new TypeError("onTimerUntil: a valid Date is required");
  return { kind: "timer_until", until };
}

/**
 * A message branch: the next message on `channel` for this instance, like
 * `receive` when subscribed, else like `waitMessage` (subscribes with `mode`,
 * default `direct`, so messages sent to the instance before the race are kept).
 */
export function onMessage<T = unknown>(channel: string, opts: { mode?: ChannelMode } = {}): RaceBranch<ChannelMessage<T>> {
  checkChannel(channel);
  return { kind: "message", channel, subscribeAs: opts.mode ?? "direct", event: false };
}

/** A CloudEvent branch, like `waitEvent` (with its `match`). */
export function onEvent<S extends z.ZodType | undefined = undefined>(type: string, opts: { schema?: S; match?: EventMatch } = {}): RaceBranch<ReceivedEvent<S extends z.ZodType ? z.output<S> : unknown>> {
  checkChannel(type);
  const match = normalizeMatch(opts.match);
  return { kind: "message", channel: type, subscribeAs: "broadcast", event: true, ...(opts.schema ? { schema: opts.schema } : {}), ...(match ? { match } : {}) };
}

/**
 * A webhook branch: the first POST to `hook`'s URL (what `hook.wait()` would
 * return). After another branch won, the URL answers 410.
 */
export function onWebhook<T = unknown>(hook: WaitWebhook<T>): RaceBranch<WebhookDelivery<T>> {
  if (typeof hook?.id !== "string" || typeof hook.wait !== "function") throw new TypeError("onWebhook: pass the hook createWebhook returned");
  return { kind: "webhook", hookId: hook.id };
}

export type RaceResult<B extends Record<string, RaceBranch<unknown>>> = { [K in keyof B & string]: { winner: K; value: B[K] extends RaceBranch<infer T> ? T : never } }[keyof B & string];

/** Resolve with the first branch to happen; see the module comment. */
export function race<B extends Record<string, RaceBranch<unknown>>>(ctx: WorkflowContext, branches: B, opts: { id?: string } = {}): Promise<RaceResult<B>> {
  const entries = Object.entries(branches);
  if (entries.length === 0) throw new TypeError("race: at least one branch is required");
  const messages = entries.filter(([, b]) => b.kind === "message");
  if (messages.length > 1) throw new TypeError(`race: at most one message or event branch (got ${messages.map(([k]) => k).join(", ")})`);
  const hooks = entries.filter(([, b]) => b.kind === "webhook");
  if (hooks.length > 1) throw new TypeError(`race: at most one webhook branch (got ${hooks.map(([k]) => k).join(", ")})`);
  const timers = entries.filter(([, b]) => b.kind === "timer" || b.kind === "timer_until");
  if (new Set(timers.map(([, b]) => b.kind)).size > 1) throw new TypeError("race: onTimer and onTimerUntil branches cannot be mixed in one race");
  // The earliest timer is the only one that can win; the first listed wins a tie.
  const first = timers.reduce<[string, RaceBranch<unknown>] | null>((best, cur) => (best && deadline(best[1]) <= deadline(cur[1]) ? best : cur), null);
  const id = operationId(ctx, "race", opts.id);
  const msg = messages[0];
  const hook = hooks[0] as [string, Extract<RaceBranch<unknown>, { kind: "webhook" }>] | undefined;
  const onHook = hook ? { hookId: hook[1].hookId, run: ctx.run } : undefined;
  const branch = msg?.[1] as Extract<RaceBranch<unknown>, { kind: "message" }> | undefined;
  const wait: WaitRequest = branch
    ? {
        kind: "message",
        activityId: id,
        channel: branch.channel,
        subscribeAs: branch.subscribeAs,
        event: branch.event,
        ...(branch.match ? { match: branch.match } : {}),
        ...(onHook ? { hook: onHook } : {}),
        ...timeoutOf(first?.[1]),
      }
    : onHook
      ? { kind: "webhook", activityId: id, ...onHook, ...(first ? { timer: timerOf(first[1]) } : {}) }
      : { kind: "timer", activityId: id, ...timerOf(first![1]) };
  return operation<RaceResult<B>>(ctx, {
    id,
    describe: `a race of ${entries.map(([k]) => k).join(", ")}`,
    request: { kind: "wait", wait },
    decode: (ev) => decodeRace(ctx, ev, msg, hook, first),
  });
}

function deadline(b: RaceBranch<unknown>): number {
  return b.kind === "timer" ? b.seconds : b.kind === "timer_until" ? b.until.getTime() : Infinity;
}

function timerOf(b: RaceBranch<unknown>): { delaySeconds: number } | { expiresAt: Date } {
  return b.kind === "timer" ? { delaySeconds: b.seconds } : { expiresAt: (b as { until: Date }).until };
}

function timeoutOf(b: RaceBranch<unknown> | undefined): { timeoutSeconds?: number; timeoutAt?: Date } {
  if (!b) return {};
  // A zero timeout would be "no timeout" for a channel wait: a due-now deadline is the same thing, 1 ms on.
  if (b.kind === "timer") return { timeoutSeconds: Math.max(b.seconds, 0.001) };
  if (b.kind === "timer_until") return { timeoutAt: b.until };
  return {};
}

function decodeRace(
  ctx: WorkflowContext,
  ev: HistoryEvent,
  msg: [string, RaceBranch<unknown>] | undefined,
  hook: [string, Extract<RaceBranch<unknown>, { kind: "webhook" }>] | undefined,
  first: [string, RaceBranch<unknown>] | null,
): Decoded {
  if ((ev.eventType === EV.TimerExpired || ev.eventType === EV.MessageTimeout) && first) return { ok: true, value: { winner: first[0], value: undefined } };
  if (hook && (ev.eventType === EV.WebhookReceived || ev.eventType === EV.WebhookExpired)) {
    // The hook's own expiry is the webhook branch's outcome: the race throws WebhookExpiredError, as hook.wait() would.
    const d = decodeWebhookRecord(ctx, ev, hook[1].hookId);
    return "ok" in d && d.ok ? { ok: true, value: { winner: hook[0], value: d.value } } : d;
  }
  if (msg && msg[1].kind === "message") {
    const b = msg[1];
    const d = decodeMessageRecord(ctx, ev, b.channel, b.event);
    if (!("ok" in d) || !d.ok) return d;
    const m = d.value as RecordedMessage;
    try {
      return { ok: true, value: { winner: msg[0], value: b.event ? toReceivedEvent(m, b.channel, b.schema) : toChannelMessage(m) } };
    } catch (error) {
      return { ok: false, error };
    }
  }
  return { mismatch: `holds a ${ev.eventType} record, which no branch of this race takes` };
}
