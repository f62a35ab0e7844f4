// A pure, in-memory stepper: drives the real replay core (ReplayState,
// ReplayRun, the operation protocol, the engine's pure `recordOutcomes`) over
// a simulated history store, message queue and virtual clock — no database.
//
// Modes, which must all reach the same result and the same history:
// - "warm": after each step the run continues in memory (as far as possible,
//   across waits too — further than the engine goes), and at every step
//   boundary a cold replay of the stored history is checked to stop at the
//   same place;
// - "cold": every step replays from the stored history;
// - "crash": steps are lost before their conclusion at random (nothing they
//   did is stored), and each surviving step continues warm or cold at random.
import { createWorkflowContext } from "../../src/core/operation.ts";
import { EV, type HistoryEvent, type NewHistoryEvent } from "../../src/core/model.ts";
import { ReplayRun, ReplayState, type PendingActivity, type ReplayOutcome, type ReplayResult } from "../../src/core/replay.ts";
import { fromJson, instanceErrorData, toJson, toPayload } from "../../src/core/serialization.ts";
import { TerminalError } from "../../src/core/errors.ts";
import { startChildActivity, type ChildStart } from "../../src/engine/children.ts";
import { childOutcomeEvent } from "../../src/engine/lifecycle.ts";
import { childWorkflow, type ChildInput } from "./programs.ts";
import { ActivityRegistry } from "../../src/core/registry.ts";
import type { ActivityContext } from "../../src/core/context.ts";
import type { ActivityOutcome } from "../../src/engine/execute.ts";
import { compensationRows, continueWith, decide, waitingPlan, type AfterCommit, type StepHistory } from "../../src/engine/decide.ts";
import type { WaitKind, WaitOf } from "../../src/engine/wait-kinds.ts";
import type { StepConclusion } from "../../src/storage/types.ts";

export type Mode = "warm" | "cold" | "crash";

export interface SimMessage {
  channel: string;
  at: number;
  data: string;
}

export interface SimResult {
  status: "completed" | "failed" | "nondeterminism" | "stuck" | "step_limit";
  output: unknown;
  history: { activityId: string; eventType: string; data: string }[];
  compensations: string[];
  steps: number;
  crashes: number;
}

type WorkflowFn = (ctx: never, input: unknown) => Promise<unknown>;

interface Conclusion {
  events: NewHistoryEvent[];
  compensations: { activityId: string; activityName: string; args: unknown[] }[];
  timer?: { id: string; at: number };
  /**
   * A message wait (on `channel`, until `timeoutAt`), a child wait, a per-wait webhook (`hook`: its POSTs
   * are the messages on `hook:{hook id}`, its expiry the hook's), or a race of a message and a webhook (both).
   */
  wait?: { activityId: string; channel: string | null; timeoutAt: number | null; child?: string; hook?: string };
  end?: { status: SimResult["status"]; output: unknown; compensate?: boolean };
  /** A queued message this step takes (consumed only if the step is stored). */
  takes?: number;
  /** A hook whose wait this step decided (used up only if the step is stored). */
  spends?: string;
  /** Activities whose final records this step wrote (a warm run continues with them). */
  settled?: PendingActivity[];
}

export async function simulate(fn: WorkflowFn, scheduled: SimMessage[], mode: Mode, rng: () => number = Math.random, maxSteps = 400): Promise<SimResult> {
  // The workflow's own POSTs (p_post) join the schedule as they happen: this run's copy.
  const messages = scheduled.slice();
  const history: HistoryEvent[] = [];
  const compensations: { activityId: string; activityName: string; args: unknown[] }[] = [];
  const timers = new Map<string, number>();
  const consumed = new Set<number>();
  // The hooks createWebhook made (their rows in the engine): when, until when, and whether a wait already ended on them.
  const hooks = new Map<string, SimHook>();
  let wait: Conclusion["wait"] | null = null;
  let now = 0;
  // Simulated children by instance id: when they end and how (from their input and start time).
  const children = new Map<string, SimChild>();
  let crashes = 0;
  let run: ReplayRun | null = null;
  let next: ReplayResult | null = null;

  // The app's registry, as the engine keeps one: compensations are resolved by name from it.
  const registry = new ActivityRegistry();
  const coldRun = () => {
    const state = new ReplayState(history.slice(), {}, registry);
    const r = new ReplayRun(fn, null, state, createWorkflowContext({ instanceId: "sim", workflowName: "sim", run: 1 }, state));
    return r;
  };
  const persist = (events: NewHistoryEvent[]): HistoryEvent[] => {
    const rows = events.map((e) => ({ ...e, id: history.length + 1, createdAt: new Date(now * 1000) }));
    for (const r of rows) {
      if (history.some((h) => h.activityId === r.activityId)) throw new Error(`duplicate history id ${r.activityId}`);
      r.id = history.length + 1;
      history.push(r);
    }
    return rows;
  };
  const result = (status: SimResult["status"], output: unknown, steps: number): SimResult => ({
    status,
    output,
    history: history.map((h) => ({ activityId: h.activityId, eventType: h.eventType, data: h.data.type === "json" ? withoutStacks(h.data.json) : "<bytes>" })),
    compensations: compensations.map((c) => `${c.activityId}=${c.activityName}(${JSON.stringify(c.args)})`),
    steps,
    crashes,
  });

  for (let step = 1; step <= maxSteps; step++) {
    if (!run) {
      run = coldRun();
      next = await run.next();
    } else if (mode === "warm") {
      // The warm run must stop where a cold replay of the same history stops.
      const cold = await coldRun().next();
      const a = describeOutcome(next!.outcome);
      const b = describeOutcome(cold.outcome);
      if (a !== b) throw new Error(`warm/cold divergence at step ${step}: warm ${a}, cold ${b}`);
    }
    const c = await conclude(next!, { messages, consumed, now, children, hooks });
    if (mode === "crash" && crashes < 8 && rng() < 0.3) {
      // Lost before the fenced conclusion: nothing of this step is stored.
      crashes++;
      run = null;
      continue;
    }
    const written = persist(c.events);
    if (c.takes !== undefined) consumed.add(c.takes);
    if (c.spends !== undefined) hooks.get(c.spends)!.spent = true;
    for (const e of written) {
      const created = createdHook(e);
      if (created && !hooks.has(e.activityId)) hooks.set(e.activityId, { createdAt: now, expiresAt: created.expiresAt === null ? null : Date.parse(created.expiresAt) / 1000, spent: false });
    }
    for (const comp of c.compensations) if (!compensations.some((x) => x.activityId === comp.activityId)) compensations.push(comp);
    if (c.timer && !timers.has(c.timer.id)) timers.set(c.timer.id, c.timer.at);
    if (c.wait) wait = c.wait;
    if (c.end) {
      if (c.end.compensate) runCompensations(registry, compensations, persist);
      return result(c.end.status, c.end.output, step);
    }
    const goWarm = mode === "warm" || (mode === "crash" && rng() < 0.5);
    if (c.settled) {
      const r: ReplayResult | null = goWarm ? await run.resume(c.settled, written) : null;
      run = r ? run : null;
      next = r;
      continue;
    }
    if (c.timer || c.wait) {
      // Idle: the next thing to happen is a timer, a message or a timeout.
      const fired = fireNext(timers, wait, { messages, consumed, now, children, hooks });
      if (!fired) return result("stuck", describeOutcome(next!.outcome), step);
      now = fired.at;
      if (fired.event.activityId === wait?.activityId) {
        // The wait is decided: the engine withdraws the rest of it with the record (a race's timer row, its hook).
        timers.delete(wait.activityId);
        if (wait.hook) hooks.get(wait.hook)!.spent = true;
        wait = null;
      }
      const rows = persist([fired.event]);
      const r: ReplayResult | null = goWarm && !fired.event.activityId.includes("#") ? await run.resume([], rows) : null;
      run = r ? run : null;
      next = r;
      continue;
    }
    // A message taken at once: the step wrote its record.
    const r: ReplayResult | null = goWarm ? await run.resume([], written) : null;
    run = r ? run : null;
    next = r;
  }
  return result("step_limit", null, maxSteps);
}

/** Stack traces name the call site of each run; everything else must match. */
function withoutStacks(json: string): string {
  return JSON.stringify(JSON.parse(json, (k, v: unknown) => (k === "stack" ? undefined : v)));
}

function describeOutcome(o: ReplayOutcome): string {
  switch (o.kind) {
    case "activities":
      return `activities ${o.activities.map((p) => `${p.activityId}@${p.attempt}`).join(",")}`;
    case "wait":
      return `wait ${o.wait.activityId}`;
    case "completed":
      return `completed ${JSON.stringify(o.output)}`;
    case "failed":
      return `failed ${(o.error as Error).name}`;
    case "recur":
      return "recur";
    case "nondeterminism":
      return `nondeterminism ${o.error.message}`;
  }
}

/**
 * The engine's own decision (engine/decide.ts) for this outcome, carried out
 * over the simulated store: activities are run here, waits look at the
 * simulated queue and children.
 */
async function conclude(next: ReplayResult, world: World): Promise<Conclusion> {
  const { messages, now, children } = world;
  const { outcome } = next;
  const history = { records: [...next.newEvents], compensations: compensationRows(next.newCompensations) };
  const base = { events: history.records, compensations: next.newCompensations };
  // A failure compensates whatever is registered: the simulation runs the saga itself at the end.
  const plan = decide(outcome, history, { handoffLeaseSeconds: 30, now: now * 1000, hasStoredCompensations: true });
  switch (plan.kind) {
    case "conclude":
      return fromConclusion(plan.conclusion, plan.after, base, now);
    case "park":
      return { ...base, end: { status: "nondeterminism", output: plan.error.message } };
    case "recur":
    case "compensate":
      throw new Error(`${plan.kind} is not part of the grammar`);
    case "run": {
      const results: { pending: PendingActivity; outcome: ActivityOutcome }[] = [];
      for (const p of plan.activities) {
        const actx = { attempt: p.attempt, activityId: p.activityId, instanceId: "sim", workflowName: "sim" } as unknown as ActivityContext;
        if (p.activity.activityName === "edda.create_webhook") {
          // The hook's row is the engine's; the recorded result is a nonce (fixed by the id, so a lost step draws the same) and the expiry.
          const { expiresInSeconds } = p.args[0] as { expiresInSeconds: number | null };
          const expiresAt = expiresInSeconds === null ? null : new Date((now + expiresInSeconds) * 1000).toISOString();
          results.push({ pending: p, outcome: { ok: true, value: { nonce: `nonce-${p.activityId}`, expiresAt } } });
          continue;
        }
        if (p.activity.activityName === "p_post") {
          // A POST to the run's own hook, now: it lands whether or not this step is stored (a non-transactional call).
          const hookId = p.args[0] as string;
          messages.push({ channel: `hook:${hookId}`, at: now, data: `posted ${hookId}` });
          results.push({ pending: p, outcome: { ok: true, value: "posted" } });
          continue;
        }
        if (p.activity === startChildActivity) {
          // The engine creates the child in this step's transaction; here it is simulated from its input
          // (a step lost before its conclusion starts it again at the same virtual time, identically).
          const start = p.args[0] as ChildStart;
          const input = start.input as ChildInput;
          if (!children.has(start.instanceId)) children.set(start.instanceId, { id: start.instanceId, at: now + input.seconds, input });
          results.push({ pending: p, outcome: { ok: true, value: start.instanceId } });
          continue;
        }
        try {
          results.push({ pending: p, outcome: { ok: true, value: await p.activity.fn(actx, ...p.args) } });
        } catch (error) {
          results.push({ pending: p, outcome: { ok: false, error } });
        }
      }
      const settled = decide({ kind: "settled", results, as: "activity", currentActivityId: plan.activities[0]!.activityId }, history, { handoffLeaseSeconds: 30, now: now * 1000 });
      const c = fromConclusion(settled.conclusion, settled.after, base, now);
      return c.timer ? c : { ...c, settled: plan.activities };
    }
    case "wait":
      return (PREPARE_IN_WORLD[plan.wait.kind] as PrepareInWorld<WaitKind>)(plan.wait, { world, history, base });
  }
}

/** What a kind's simulated prepare works with: the store, the step's rows, and the conclusion's base. */
interface PrepareScope {
  world: World;
  history: StepHistory;
  base: Pick<Conclusion, "events" | "compensations">;
}
type PrepareInWorld<K extends WaitKind> = (w: WaitOf<K>, scope: PrepareScope) => Conclusion;

/**
 * The engine's prepare of each wait kind (engine/wait-kinds.ts), over the simulated store: a table over the
 * declared kinds (core/model.ts WAIT_KINDS), so a new kind fails to compile until the stepper handles it.
 */
const PREPARE_IN_WORLD: { [K in WaitKind]: PrepareInWorld<K> } = {
  timer: () => {
    throw new Error("a timer wait has nothing to prepare: decide concludes it");
  },
  webhook: (w, { world, history, base }) => {
    // A POST that came before the wait is taken at once (the engine's prepare); else the instance waits for one,
    // with a race's timer registered as the engine's conclusion registers it.
    const ready = prepareHook(world, w.hookId, w.activityId);
    if (ready) return { ...base, ...ready, events: continueWith(w.activityId, history, ready.event, { handoffLeaseSeconds: 30 }).conclusion.history! };
    const plan = waitingPlan(w, history, { kind: "waiting", wakeInSeconds: null }, world.now * 1000);
    return { ...fromConclusion(plan.conclusion, plan.after, base, world.now), wait: { activityId: w.activityId, channel: null, timeoutAt: null, hook: w.hookId } };
  },
  child: (w, { world, history, base }) => {
    const child = world.children.get(w.childInstanceId)!;
    if (child.at <= world.now) return { ...base, events: continueWith(w.activityId, history, childEvent(w.activityId, child), { handoffLeaseSeconds: 30 }).conclusion.history! };
    return { ...base, wait: { activityId: w.activityId, channel: "", timeoutAt: null, child: child.id } };
  },
  message: (w, { world, history, base }) => {
    const { messages, consumed, now } = world;
    // A race's webhook branch is looked at first, as the engine's prepare does.
    const ready = w.hook ? prepareHook(world, w.hook.hookId, w.activityId) : null;
    if (ready) return { ...base, ...ready, events: continueWith(w.activityId, history, ready.event, { handoffLeaseSeconds: 30 }).conclusion.history! };
    const i = messages.findIndex((m, idx) => !consumed.has(idx) && m.channel === w.channel && m.at <= now);
    if (i >= 0) return { ...base, takes: i, ...(w.hook ? { spends: w.hook.hookId } : {}), events: continueWith(w.activityId, history, received(w.activityId, messages[i]!, i), { handoffLeaseSeconds: 30 }).conclusion.history! };
    const timeoutAt = w.timeoutAt ? w.timeoutAt.getTime() / 1000 : w.timeoutSeconds === undefined ? null : now + w.timeoutSeconds;
    return { ...base, wait: { activityId: w.activityId, channel: w.channel, timeoutAt, ...(w.hook ? { hook: w.hook.hookId } : {}) } };
  },
};

/** A concluding plan in the simulation's terms: its records, its timer (due at virtual time), or the end it reached. */
function fromConclusion(c: StepConclusion, after: AfterCommit, base: Pick<Conclusion, "compensations">, now: number): Conclusion {
  const out: Conclusion = { ...base, events: c.history ?? [] };
  if (c.timer) out.timer = { id: c.timer.timerId, at: c.timer.expiresAt ? c.timer.expiresAt.getTime() / 1000 : now + (c.timer.delaySeconds ?? 0) };
  if (after.workflow?.kind === "completed") out.end = { status: "completed", output: after.workflow.output };
  if (c.status === "failed" || c.status === "compensating") out.end = { status: "failed", output: (fromJson(c.errorData!) as { error_message: string }).error_message, compensate: true };
  return out;
}

/** What the simulated database holds besides history: the queue, the children, the hooks, and the virtual clock. */
interface World {
  messages: SimMessage[];
  consumed: Set<number>;
  now: number;
  children: Map<string, SimChild>;
  hooks: Map<string, SimHook>;
}

interface SimHook {
  createdAt: number;
  expiresAt: number | null;
  /** A wait already ended on it (took its POST, or lost its race): it gives nothing again. */
  spent: boolean;
}

/** The recorded result of a createWebhook, if `e` is one. */
function createdHook(e: NewHistoryEvent): { expiresAt: string | null } | null {
  if (e.eventType !== EV.ActivityCompleted || e.data.type !== "json") return null;
  const v = JSON.parse(e.data.json) as { name?: string; result?: { expiresAt: string | null } };
  return v.name === "edda.create_webhook" ? v.result! : null;
}

/**
 * The POST a hook accepts, if any: the earliest on `hook:{id}` sent while the URL existed and had not expired
 * (earlier ones found no hook, 404; later ones 410). None once a wait ended on the hook.
 */
function acceptedPost(world: World, hookId: string): number {
  const h = world.hooks.get(hookId)!;
  if (h.spent) return -1;
  let first = -1;
  world.messages.forEach((m, idx) => {
    const valid = !world.consumed.has(idx) && m.channel === `hook:${hookId}` && m.at >= h.createdAt && (h.expiresAt === null || m.at < h.expiresAt);
    if (valid && (first < 0 || m.at < world.messages[first]!.at)) first = idx;
  });
  return first;
}

/** The engine's webhook prepare: a POST already accepted, an expiry already due, a hook already used up — or null: the wait listens. */
function prepareHook(world: World, hookId: string, waitId: string): { event: NewHistoryEvent; takes?: number; spends: string } | null {
  const h = world.hooks.get(hookId)!;
  const expiredAt = h.expiresAt === null ? null : new Date(h.expiresAt * 1000).toISOString();
  if (h.spent) return { event: { activityId: waitId, eventType: EV.WebhookExpired, data: toPayload({ hook_id: hookId, expired_at: expiredAt, status: "cancelled" }) }, spends: hookId };
  const i = acceptedPost(world, hookId);
  if (i >= 0 && world.messages[i]!.at <= world.now) return { event: received(waitId, world.messages[i]!, i, true), takes: i, spends: hookId };
  if (h.expiresAt !== null && h.expiresAt <= world.now) return { event: { activityId: waitId, eventType: EV.WebhookExpired, data: toPayload({ hook_id: hookId, expired_at: expiredAt }) }, spends: hookId };
  return null;
}

interface SimChild {
  id: string;
  at: number;
  input: ChildInput;
}

/** The record a simulated child's end writes at its parent's wait (the engine's own builder). */
function childEvent(activityId: string, child: SimChild): NewHistoryEvent {
  const ref = { instanceId: child.id, workflowName: childWorkflow.workflowName };
  return child.input.fail
    ? childOutcomeEvent(activityId, ref, "failed", null, instanceErrorData(new TerminalError(`child ${child.input.arg} failed`)))
    : childOutcomeEvent(activityId, ref, "completed", toJson(`child(${child.input.arg})`), null);
}

function received(activityId: string, m: SimMessage, i: number, webhook = false): NewHistoryEvent {
  if (webhook) return { activityId, eventType: EV.WebhookReceived, data: toPayload({ body: m.data, contentType: "text/plain", headers: {}, receivedAt: new Date(m.at * 1000).toISOString() }) };
  return {
    activityId,
    eventType: EV.MessageReceived,
    data: toPayload({ messageId: `msg-${i}`, channel: m.channel, data: m.data, metadata: null, publishedAt: new Date(m.at * 1000).toISOString() }),
  };
}

/**
 * The earliest of: a due timer, a message for the wait, the wait's timeout, a POST its hook accepts, the
 * hook's expiry (a message or a POST wins a tie with a timeout or a timer; a POST at the expiry is refused).
 */
function fireNext(timers: Map<string, number>, wait: Conclusion["wait"] | null, world: World): { at: number; event: NewHistoryEvent } | null {
  const { messages, consumed, now, children } = world;
  const candidates: { at: number; rank: number; fire: () => NewHistoryEvent }[] = [];
  for (const [id, at] of timers) {
    candidates.push({ at, rank: 1, fire: () => (timers.delete(id), { activityId: id, eventType: EV.TimerExpired, data: toPayload({ timer_id: id }) }) });
  }
  if (wait?.child) {
    const child = children.get(wait.child)!;
    candidates.push({ at: Math.max(now, child.at), rank: 0, fire: () => childEvent(wait.activityId, child) });
  } else if (wait) {
    const i = wait.channel === null ? -1 : messages.findIndex((m, idx) => !consumed.has(idx) && m.channel === wait.channel);
    if (i >= 0) candidates.push({ at: Math.max(now, messages[i]!.at), rank: 0, fire: () => (consumed.add(i), received(wait.activityId, messages[i]!, i)) });
    if (wait.timeoutAt !== null) {
      const at = wait.timeoutAt;
      candidates.push({ at, rank: 2, fire: () => ({ activityId: wait.activityId, eventType: EV.MessageTimeout, data: toPayload({ channel: wait.channel }) }) });
    }
    if (wait.hook) {
      const hookId = wait.hook;
      const h = world.hooks.get(hookId)!;
      const p = acceptedPost(world, hookId);
      if (p >= 0) candidates.push({ at: Math.max(now, messages[p]!.at), rank: 0, fire: () => (consumed.add(p), received(wait.activityId, messages[p]!, p, true)) });
      if (h.expiresAt !== null) {
        const expired = { hook_id: hookId, expired_at: new Date(h.expiresAt * 1000).toISOString() };
        candidates.push({ at: Math.max(now, h.expiresAt), rank: 3, fire: () => ({ activityId: wait.activityId, eventType: EV.WebhookExpired, data: toPayload(expired) }) });
      }
    }
  }
  candidates.sort((a, b) => a.at - b.at || a.rank - b.rank);
  const first = candidates[0];
  return first ? { at: first.at, event: first.fire() } : null;
}

/** Saga: registered compensations newest first, each recorded once. */
function runCompensations(registry: ActivityRegistry, comps: { activityId: string; activityName: string; args: unknown[] }[], persist: (e: NewHistoryEvent[]) => unknown) {
  for (const c of [...comps].reverse()) {
    if (!registry.find(c.activityName)) throw new Error(`compensation ${c.activityName} is not registered`);
    persist([{ activityId: `compensate:${c.activityId}`, eventType: EV.CompensationExecuted, data: toPayload({ name: c.activityName, args: c.args }) }]);
  }
}
