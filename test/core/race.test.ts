// race(): one operation, one record, the same winner on every path (pure).
import { describe, expect, it } from "vitest";
import { createWebhook, onMessage, onTimer, onTimerUntil, onWebhook, race, receive, sleep, type RaceBranch, type WaitWebhook, type WorkflowContext } from "../../src/index.ts";
import { simulate, type SimMessage } from "./stepper.ts";

const firstOf = (timeout: number) =>
  (async (ctx: WorkflowContext) => {
    const r = await race(ctx, { reply: onMessage<string>("response"), late: onTimer(timeout), later: onTimer(timeout + 5) });
    // A message that lost stays in the channel: the next receive gets it.
    const after = await receive<string>(ctx, "response", { timeoutSeconds: 100 }).then((m) => m.data, (e: Error) => e.name);
    return { winner: r.winner, value: r.winner === "reply" ? r.value.data : null, after };
  }) as never;

async function onAllPaths(fn: never, messages: SimMessage[]) {
  const warm = await simulate(fn, messages, "warm");
  for (const mode of ["cold", "crash"] as const) {
    const other = await simulate(fn, messages, mode, () => 0.2);
    expect({ output: other.output, history: other.history }).toEqual({ output: warm.output, history: warm.history });
  }
  return warm;
}

describe("race (pure)", () => {
  it("a message before the earliest timer wins; replay returns the same winner", async () => {
    const r = await onAllPaths(firstOf(10), [{ channel: "response", at: 4, data: "yes" }]);
    expect(r.output).toEqual({ winner: "reply", value: "yes", after: "MessageTimeoutError" });
    expect(r.history.map((h) => `${h.activityId} ${h.eventType}`)).toEqual(["race:1 MessageReceived", "receive_response:1 MessageTimeout"]);
  });

  it("the earliest timer wins when no message comes in time; the late message stays for the next receive", async () => {
    const r = await onAllPaths(firstOf(10), [{ channel: "response", at: 30, data: "late" }]);
    expect(r.output).toEqual({ winner: "late", value: null, after: "late" });
    expect(r.history.map((h) => `${h.activityId} ${h.eventType}`)).toEqual(["race:1 MessageTimeout", "receive_response:1 MessageReceived"]);
  });

  it("a message and the timer at the same instant: exactly one record, the message is not lost", async () => {
    const r = await onAllPaths(firstOf(10), [{ channel: "response", at: 10, data: "tie" }]);
    const out = r.output as { winner: string; value: string | null; after: string };
    expect([out.value, out.after]).toContain("tie");
    expect(r.history.filter((h) => h.activityId === "race:1")).toHaveLength(1);
  });

  it("timers only: the earliest wins, and absolute timers work the same", async () => {
    const rel = await onAllPaths((async (ctx: WorkflowContext) => (await race(ctx, { b: onTimer(9), a: onTimer(3), c: onTimer(3) })).winner) as never, []);
    expect(rel.output).toBe("a");
    const abs = await onAllPaths((async (ctx: WorkflowContext) => (await race(ctx, { x: onTimerUntil(new Date(50_000)), y: onTimerUntil(new Date(20_000)) })).winner) as never, []);
    expect(abs.output).toBe("y");
  });

  it("races beside other operations and in sequence keep deterministic ids", async () => {
    const fn = (async (ctx: WorkflowContext) => {
      const [a] = await Promise.all([race(ctx, { t: onTimer(2) }), sleep(ctx, 1)]);
      const b = await race(ctx, { m: onMessage<string>("response"), t: onTimer(50) });
      return [a.winner, b.winner];
    }) as never;
    const r = await onAllPaths(fn, [{ channel: "response", at: 5, data: "x" }]);
    expect(r.output).toEqual(["t", "m"]);
  });

  it("rejects races it cannot decide deterministically", () => {
    const ctx = {} as WorkflowContext;
    const hook = { id: "webhook:1", wait: () => Promise.resolve() } as unknown as WaitWebhook;
    expect(() => race(ctx, { a: onWebhook(hook), b: onWebhook(hook) })).toThrow(/at most one webhook/);
    expect(() => onWebhook({} as WaitWebhook)).toThrow(TypeError);
    expect(() => race(ctx, {})).toThrow(TypeError);
    expect(() => race(ctx, { a: onMessage("x"), b: onMessage("y") })).toThrow(/at most one message/);
    expect(() => race(ctx, { a: onTimer(1), b: onTimerUntil(new Date()) })).toThrow(/cannot be mixed/);
  });
});

/** A link raced against a deadline (and a reply): who won, and what a wait on the hook gets afterwards. */
const hookRace = (opts: { timer?: number; reply?: boolean; expiresIn?: number; sleepFirst?: number }) =>
  (async (ctx: WorkflowContext) => {
    if (opts.sleepFirst) await sleep(ctx, opts.sleepFirst);
    const hook = await createWebhook<string>(ctx, opts.expiresIn ? { expiresIn: opts.expiresIn } : {});
    const branches: Record<string, RaceBranch<unknown>> = { approved: onWebhook(hook) };
    if (opts.reply) branches.reply = onMessage<string>("response");
    if (opts.timer !== undefined) branches.late = onTimer(opts.timer);
    const r = await race(ctx, branches).then(
      (x) => ({ winner: x.winner, value: (x.value as { body?: unknown; data?: unknown } | undefined)?.body ?? (x.value as { data?: unknown } | undefined)?.data ?? null }),
      (e: Error) => ({ winner: e.name, value: null }),
    );
    const after = await hook.wait().then(
      (d) => d.body,
      (e: Error) => e.name,
    );
    return { ...r, after };
  }) as never;

const shapeOf = (r: { history: { activityId: string; eventType: string }[] }) => r.history.map((h) => `${h.activityId} ${h.eventType}`);

describe("race with a webhook branch (pure)", () => {
  it("a POST before the timer wins; the hook then gives a later wait nothing", async () => {
    const r = await onAllPaths(hookRace({ timer: 10 }), [{ channel: "hook:webhook:1", at: 4, data: "yes" }]);
    expect(r.output).toEqual({ winner: "approved", value: "yes", after: "WebhookExpiredError" });
    expect(shapeOf(r)).toEqual(["webhook:1 ActivityCompleted", "race:1 WebhookReceived", "webhook:1:wait WebhookExpired"]);
  });

  it("the timer wins when the POST comes late: the late POST is not accepted anywhere", async () => {
    const r = await onAllPaths(hookRace({ timer: 10 }), [{ channel: "hook:webhook:1", at: 30, data: "late" }]);
    expect(r.output).toEqual({ winner: "late", value: null, after: "WebhookExpiredError" });
    expect(shapeOf(r)).toEqual(["webhook:1 ActivityCompleted", "race:1 TimerExpired", "webhook:1:wait WebhookExpired"]);
  });

  it("a message wins against the webhook and the timer", async () => {
    const r = await onAllPaths(hookRace({ timer: 10, reply: true }), [
      { channel: "response", at: 3, data: "mail" },
      { channel: "hook:webhook:1", at: 5, data: "link" },
    ]);
    expect(r.output).toEqual({ winner: "reply", value: "mail", after: "WebhookExpiredError" });
  });

  it("a POST that came before the race wins over a queued message", async () => {
    const fn = (async (ctx: WorkflowContext) => {
      const hook = await createWebhook<string>(ctx);
      await sleep(ctx, 10);
      const r = await race(ctx, { reply: onMessage<string>("response"), approved: onWebhook(hook) });
      const next = (await receive<string>(ctx, "response")).data;
      return [r.winner, next];
    }) as never;
    const r = await onAllPaths(fn, [
      { channel: "response", at: 2, data: "mail" },
      { channel: "hook:webhook:1", at: 4, data: "link" },
    ]);
    expect(r.output).toEqual(["approved", "mail"]);
  });

  it("the hook's own expiry ends the race with WebhookExpiredError; a POST before the hook existed is not accepted", async () => {
    const expired = await onAllPaths(hookRace({ timer: 60, expiresIn: 5 }), [{ channel: "hook:webhook:1", at: 7, data: "after expiry" }]);
    expect(expired.output).toEqual({ winner: "WebhookExpiredError", value: null, after: "WebhookExpiredError" });
    expect(shapeOf(expired)).toContain("race:1 WebhookExpired");
    const early = await onAllPaths(hookRace({ timer: 10, sleepFirst: 5 }), [{ channel: "hook:webhook:1", at: 2, data: "too early" }]);
    expect(early.output).toMatchObject({ winner: "late" });
  });
});
