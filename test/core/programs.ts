// A small grammar of workflow programs for the equivalence properties, an
// interpreter that turns a program into a real workflow function over the
// public API, and fast-check arbitraries that generate programs.
//
// Activity names come from a tiny set on purpose: concurrent branches calling
// the same activity name are where per-name counters could disagree between
// a run continued in memory and a cold replay.
import fc from "fast-check";
import { activity, createWebhook, invoke, onMessage, onTimer, onWebhook, patched, race, receive, registerCompensation, sleep, TerminalError, workflow, type RaceBranch, type WorkflowContext } from "../../src/index.ts";

/** What an activity call does, per attempt: fail transiently `transient` times, then succeed or fail for good. */
export interface ActBehaviour {
  transient: number;
  terminal: boolean;
}

export type Stmt =
  | { t: "act"; name: ActName; arg: number; b: ActBehaviour }
  | { t: "sleep"; seconds: number }
  | { t: "receive"; channel: Channel; timeout: number | null }
  | { t: "comp"; arg: number }
  /** A child workflow that ends `seconds` after it starts, with `child(arg)` or a failure. */
  | { t: "invoke"; arg: number; fail: boolean; seconds: number }
  | { t: "patched"; change: "x" | "y" }
  /**
   * A per-wait webhook: created (expiring after `expiresIn` seconds, or never), POSTed to by an activity of
   * the workflow when `post` (else only by the program's messages on `hook:{id}`), then waited on — alone, or
   * raced against a timer and/or a message.
   */
  | { t: "hook"; expiresIn: number | null; post: boolean; race: { timer: number | null; channel: Channel | null } | null }
  | { t: "all"; branches: Stmt[][] }
  | { t: "try"; body: Stmt[] }
  | { t: "helper"; body: Stmt[] };

export interface Program {
  body: Stmt[];
  /** Messages that arrive on a channel (or POSTs to a hook: `hook:{hook id}`) at a virtual time (seconds). */
  messages: { channel: string; at: number; data: string }[];
}

export const ACT_NAMES = ["p_a", "p_b", "p_c"] as const;
export type ActName = (typeof ACT_NAMES)[number];
export const CHANNELS = ["m1", "m#2"] as const;
export type Channel = (typeof CHANNELS)[number];

// Short intervals so the database-backed variant runs retries in real time quickly.
const RETRY = { maxAttempts: 3, initialIntervalSeconds: 0.01, backoffCoefficient: 2, maxIntervalSeconds: 0.04, maxDurationSeconds: 600 };

/** One activity per name; the behaviour travels in the arguments. */
const acts = Object.fromEntries(
  ACT_NAMES.map((name) => [
    name,
    activity(
      name,
      async (ctx, arg: number, b: ActBehaviour) => {
        if (ctx.attempt <= b.transient) throw new Error(`${name}(${arg}) transient ${ctx.attempt}`);
        if (b.terminal) throw new TerminalError(`${name}(${arg}) failed`);
        return `${name}(${arg})`;
      },
      { retry: RETRY },
    ),
  ]),
) as Record<ActName, ReturnType<typeof activity<[number, ActBehaviour], string>>>;

export const undo = activity("p_undo", async (_ctx, arg: number) => `undone ${arg}`);

/** How `p_post` reaches a hook: the database-backed variant sets the app's request (the pure stepper records it itself). */
let hookPoster: (path: string, body: string) => Promise<number> = () => Promise.reject(new Error("no hook poster set"));
export function setHookPoster(fn: typeof hookPoster): void {
  hookPoster = fn;
}

/**
 * A workflow POSTing to its own hook (as a sender would), non-transactional like any HTTP call: a retry
 * after a lost step POSTs again and gets 410, which is fine. The body is the text the wait sees.
 */
export const postHook = activity(
  "p_post",
  async (_ctx, hookId: string, path: string) => {
    const status = await hookPoster(path, JSON.stringify(`posted ${hookId}`));
    if (status !== 202 && status !== 410) throw new Error(`POST ${hookId}: ${status}`);
    return "posted";
  },
  { transactional: false },
);

export interface ChildInput {
  arg: number;
  fail: boolean;
  seconds: number;
}

/** The child the programs invoke (the pure stepper simulates its run from its input). */
export const childWorkflow = workflow("p_child", async (ctx, input: ChildInput) => {
  await sleep(ctx, input.seconds);
  if (input.fail) throw new TerminalError(`child ${input.arg} failed`);
  return `child(${input.arg})`;
});

/** Runs a program; `trace` records what the workflow observed, in order. */
export async function interpret(ctx: WorkflowContext, body: Stmt[], trace: string[]): Promise<void> {
  for (const s of body) await exec(ctx, s, trace);
}

async function exec(ctx: WorkflowContext, s: Stmt, trace: string[]): Promise<void> {
  switch (s.t) {
    case "act":
      trace.push(await acts[s.name](ctx, s.arg, s.b));
      return;
    case "sleep":
      await sleep(ctx, s.seconds);
      trace.push(`slept ${s.seconds}`);
      return;
    case "receive": {
      const m = await receive<string>(ctx, s.channel, s.timeout === null ? {} : { timeoutSeconds: s.timeout });
      trace.push(`got ${m.data}`);
      return;
    }
    case "comp":
      await registerCompensation(ctx, undo, s.arg);
      trace.push(`comp ${s.arg}`);
      return;
    case "invoke":
      trace.push(await invoke(ctx, childWorkflow, { arg: s.arg, fail: s.fail, seconds: s.seconds }));
      return;
    case "patched":
      trace.push(`patched ${s.change} ${await patched(ctx, s.change)}`);
      return;
    case "hook": {
      const hook = await createWebhook<string>(ctx, s.expiresIn === null ? {} : { expiresIn: s.expiresIn });
      if (s.post) trace.push(await postHook(ctx, hook.id, hook.path));
      if (!s.race) {
        trace.push(`hook ${hook.id} ${(await hook.wait()).body}`);
        return;
      }
      const branches: Record<string, RaceBranch<unknown>> = { hook: onWebhook(hook) };
      if (s.race.channel) branches.msg = onMessage<string>(s.race.channel);
      if (s.race.timer !== null) branches.late = onTimer(s.race.timer);
      const r = await race(ctx, branches);
      const v = r.value as { body?: unknown; data?: unknown } | undefined;
      trace.push(`race ${hook.id} ${r.winner} ${String(v?.body ?? v?.data ?? "")}`);
      return;
    }
    case "all":
      await Promise.all(s.branches.map((b) => interpret(ctx, b, trace)));
      return;
    case "try":
      try {
        await interpret(ctx, s.body, trace);
      } catch (e) {
        trace.push(`caught ${(e as Error).name}: ${(e as Error).message}`);
      }
      return;
    case "helper":
      await interpret(ctx, s.body, trace);
      return;
  }
}

/** The workflow function of a program: returns the trace. */
export function programFn(p: Program) {
  return async (ctx: WorkflowContext) => {
    const trace: string[] = [];
    await interpret(ctx, p.body, trace);
    return trace;
  };
}

// --- arbitraries ---------------------------------------------------------------

const behaviour: fc.Arbitrary<ActBehaviour> = fc.oneof(
  { weight: 12, arbitrary: fc.constant({ transient: 0, terminal: false }) },
  // 3 transient failures exhaust the 3 attempts: RetryExhaustedError.
  { weight: 3, arbitrary: fc.record({ transient: fc.integer({ min: 1, max: 3 }), terminal: fc.constant(false) }) },
  { weight: 1, arbitrary: fc.record({ transient: fc.constant(0), terminal: fc.constant(true) }) },
);

const leaf: fc.Arbitrary<Stmt> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ t: fc.constant("act" as const), name: fc.constantFrom(...ACT_NAMES), arg: fc.integer({ min: 0, max: 9 }), b: behaviour }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("sleep" as const), seconds: fc.constantFrom(0, 1, 5, 30) }) },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant("receive" as const), channel: fc.constantFrom(...CHANNELS), timeout: fc.option(fc.constantFrom(2, 10, 60), { nil: null }) }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("comp" as const), arg: fc.integer({ min: 0, max: 9 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant("invoke" as const), arg: fc.integer({ min: 0, max: 9 }), fail: fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }), seconds: fc.constantFrom(0, 3, 20) }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("patched" as const), change: fc.constantFrom("x" as const, "y" as const) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("hook" as const),
      expiresIn: fc.option(fc.constantFrom(4, 25, 70), { nil: null }),
      post: fc.boolean(),
      race: fc.option(fc.record({ timer: fc.option(fc.constantFrom(0, 3, 30), { nil: null }), channel: fc.option(fc.constantFrom(...CHANNELS), { nil: null }) }), { nil: null }),
    }),
  },
);

const stmt: fc.Arbitrary<Stmt> = fc.letrec<{ stmt: Stmt; block: Stmt[] }>((tie) => ({
  stmt: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    { weight: 8, arbitrary: leaf },
    { weight: 2, arbitrary: fc.record({ t: fc.constant("all" as const), branches: fc.array(tie("block"), { minLength: 2, maxLength: 3 }) }) },
    { weight: 2, arbitrary: fc.record({ t: fc.constant("try" as const), body: tie("block") }) },
    { weight: 1, arbitrary: fc.record({ t: fc.constant("helper" as const), body: tie("block") }) },
  ),
  block: fc.array(tie("stmt"), { minLength: 1, maxLength: 3 }),
})).stmt;

/** Programs the database-backed variant runs in real time: no message waits, timers and children of 0 s, hooks decided at once. */
export function forDatabase(body: Stmt[]): Stmt[] {
  return body.flatMap((s): Stmt[] => {
    switch (s.t) {
      case "receive":
        return [];
      case "sleep":
      case "invoke":
        return [{ ...s, seconds: 0 }];
      case "hook": {
        // Real time, no messages: a POST is the workflow's own (so it precedes the wait), a race's timer is 0 s and
        // wins when nothing was POSTed; a hook nobody POSTs to and no timer decides expires after 50 ms.
        const timer = s.race?.timer === undefined || s.race.timer === null ? null : 0;
        const race = s.race ? { timer, channel: null } : null;
        return [{ ...s, race, expiresIn: s.post || timer !== null ? null : 0.05 }];
      }
      case "all":
        return [{ ...s, branches: s.branches.map(forDatabase) }];
      case "try":
      case "helper":
        return [{ ...s, body: forDatabase(s.body) }];
      default:
        return [s];
    }
  });
}

/** Messages arrive on the channels, and as POSTs to the first hooks a program creates (`hook:webhook:n`). */
const MESSAGE_CHANNELS = [...CHANNELS, "hook:webhook:1", "hook:webhook:2"] as const;

export const programArb: fc.Arbitrary<Program> = fc.record({
  body: fc.array(stmt, { minLength: 1, maxLength: 5 }),
  messages: fc.array(fc.record({ channel: fc.constantFrom(...MESSAGE_CHANNELS), at: fc.integer({ min: 0, max: 90 }), data: fc.string({ maxLength: 3 }) }), { maxLength: 5 }),
});
