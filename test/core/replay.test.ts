// Named regressions for the replay core, pure (no database): each runs the
// real core through the stepper warm, cold and with crashes.
import { describe, expect, it } from "vitest";
import { activity, createWebhook, receive, sleep, workflow, type WorkflowContext } from "../../src/index.ts";
import { programFn, type Program } from "./programs.ts";
import { simulate } from "./stepper.ts";

const ok = { transient: 0, terminal: false };
const comparable = (r: Awaited<ReturnType<typeof simulate>>) => ({ status: r.status, output: r.output, history: r.history });

async function allPathsAgree(p: Program) {
  const fn = programFn(p) as never;
  const warm = await simulate(fn, p.messages, "warm");
  expect(comparable(await simulate(fn, p.messages, "cold"))).toEqual(comparable(warm));
  for (let seed = 1; seed <= 5; seed++) {
    let s = seed;
    const rng = () => ((s = (s * 16807) % 2147483647) / 2147483647);
    expect(comparable(await simulate(fn, p.messages, "crash", rng))).toEqual(comparable(warm));
  }
  return warm;
}

describe("replay core regressions", () => {
  it("per-wait webhooks created in concurrent branches settle `later` (Web Crypto) at the same wave warm, cold and after crashes: same URLs, same ids after them", async () => {
    const mail = activity("wh_mail", async (_ctx, path: string) => `mailed ${path.length}`);
    const wf = workflow("wh_replay", async (ctx) => {
      const [a, b] = await Promise.all([createWebhook(ctx), createWebhook(ctx, { id: "second" })]);
      // Each branch calls the same activity after its own creation: the ids it gets show the order the creations settled in.
      const mailed = await Promise.all([mail(ctx, a.path), mail(ctx, b.path)]);
      const early = await b.wait();
      const late = await a.wait();
      return { a: a.path, b: b.path, mailed, got: [early.body, late.body] };
    });
    const fn = wf.fn as never;
    const messages = [
      { channel: "hook:second", at: 0, data: "posted before its wait" },
      { channel: "hook:webhook:1", at: 50, data: "posted while waiting" },
    ];
    const warm = await simulate(fn, messages, "warm");
    expect(comparable(await simulate(fn, messages, "cold"))).toEqual(comparable(warm));
    for (let seed = 1; seed <= 5; seed++) {
      let s = seed;
      const rng = () => ((s = (s * 16807) % 2147483647) / 2147483647);
      expect(comparable(await simulate(fn, messages, "crash", rng))).toEqual(comparable(warm));
    }
    expect(warm.status).toBe("completed");
    const out = warm.output as { a: string; b: string; got: unknown[] };
    expect(out.a).toMatch(/^\/hooks\/[A-Za-z0-9_-]{43}$/);
    expect(out.b).not.toBe(out.a);
    expect(out.got).toEqual(["posted before its wait", "posted while waiting"]);
    expect(warm.history.map((h) => h.activityId)).toEqual(["webhook:1", "second", "wh_mail:1", "wh_mail:2", "second:wait", "webhook:1:wait"]);
  });

  it("Promise.all([activity, sleep]) waits on the timer on the warm path too (was NonDeterminismError)", async () => {
    const r = await allPathsAgree({ body: [{ t: "all", branches: [[{ t: "act", name: "p_a", arg: 1, b: ok }], [{ t: "sleep", seconds: 5 }]] }], messages: [] });
    expect(r.status).toBe("completed");
    expect(r.output).toEqual(["p_a(1)", "slept 5"]);
    expect(r.history.map((h) => h.activityId)).toEqual(["p_a:1", "sleep:1"]);
  });

  it("Promise.all([activity, receive]) waits on the message on the warm path too", async () => {
    const r = await allPathsAgree({
      body: [{ t: "all", branches: [[{ t: "act", name: "p_b", arg: 2, b: ok }], [{ t: "receive", channel: "m1", timeout: null }]] }],
      messages: [{ channel: "m1", at: 10, data: "hi" }],
    });
    expect(r.output).toEqual(["p_b(2)", "got hi"]);
  });

  it("same-name activities in concurrent branches, one retrying, keep their ids on every path", async () => {
    // Found by the property suite against a loop that delivered several records per wave.
    const r = await allPathsAgree({
      body: [
        { t: "all", branches: [[{ t: "act", name: "p_a", arg: 0, b: ok }], [{ t: "act", name: "p_a", arg: 1, b: { transient: 1, terminal: false } }]] },
        { t: "sleep", seconds: 0 },
      ],
      messages: [],
    });
    expect(r.output).toEqual(["p_a(0)", "p_a(1)", "slept 0"]);
  });

  it("a receive on a channel named with '#' is delivered and replayed (was taken for an attempt row)", async () => {
    const r = await allPathsAgree({ body: [{ t: "receive", channel: "m#2", timeout: 30 }], messages: [{ channel: "m#2", at: 1, data: "x" }] });
    expect(r.output).toEqual(["got x"]);
    expect(r.history.map((h) => h.activityId)).toEqual(["receive_m%232:1"]);
  });

  it("a record the code no longer asks for is a NonDeterminismError naming both sides", async () => {
    const first = activity("nd_first", async () => 1);
    const second = activity("nd_second", async () => 2);
    let version = 1;
    const fn = (async (ctx: WorkflowContext) => (version === 1 ? first(ctx) : second(ctx))) as never;
    const v1 = await simulate(fn, [], "cold");
    expect(v1.status).toBe("completed");
    version = 2;
    const { ReplayRun, ReplayState } = await import("../../src/core/replay.ts");
    const { createWorkflowContext } = await import("../../src/core/operation.ts");
    const history = v1.history.map((h, i) => ({ ...h, id: i + 1, createdAt: new Date(0), data: { type: "json" as const, json: h.data } }));
    const state = new ReplayState(history, {});
    const r = await new ReplayRun(fn, null, state, createWorkflowContext({ instanceId: "i", workflowName: "w", run: 1 }, state)).next();
    expect(r.outcome.kind).toBe("nondeterminism");
    expect(String((r.outcome as { error: Error }).error.message)).toMatch(/nd_first.*nd_second/s);
  });

  // Also guards a bug the stepper found: a value the run recorded itself was appended twice when the step's rows came back.
  it("ctx.now(), ctx.random() and ctx.uuid() are recorded once and replayed identically at every step", async () => {
    const tick = activity("det_tick", async () => "tick");
    const wf = workflow("det_values", async (ctx) => {
      const a = [await ctx.now(), await ctx.random(), await ctx.uuid()];
      await tick(ctx);
      await sleep(ctx, 1);
      const b = [await ctx.now(), await ctx.random(), await ctx.uuid()];
      await tick(ctx);
      return [a, b].map(([d, r, u]) => [(d as Date).toISOString(), r, u]);
    });
    for (const mode of ["warm", "cold"] as const) {
      const r = await simulate(wf.fn as never, [], mode);
      expect(r.status).toBe("completed");
      const recorded = r.history.filter((h) => h.eventType === "ValueRecorded").map((h) => JSON.parse(h.data).value as unknown);
      const out = r.output as [string, number, string][];
      expect(recorded).toEqual(out.flatMap(([d, n, u]) => [{ $date: d }, n, u]));
      expect(r.history.filter((h) => h.eventType === "ValueRecorded").map((h) => h.activityId)).toEqual(["now:1", "random:1", "uuid:1", "now:2", "random:2", "uuid:2"]);
      expect(out[0]![2]).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it("an explicit id used twice in one run is a NonDeterminismError, not a silent overwrite", async () => {
    const echo = activity("dup_echo", async (_c, n: number) => n);
    const fn = (async (ctx: WorkflowContext) => Promise.all([echo.withId("same")(ctx, 1), echo.withId("same")(ctx, 2)])) as never;
    const r = await simulate(fn, [], "cold");
    expect(r.status).toBe("nondeterminism");
    expect(String(r.output)).toMatch(/two operations use the id same/);
  });

  it("receive with a timeout that passes throws MessageTimeoutError the code can catch", async () => {
    const fn = (async (ctx: WorkflowContext) => {
      try {
        await receive(ctx, "none", { timeoutSeconds: 3 });
        return "got";
      } catch (e) {
        return (e as Error).name;
      }
    }) as never;
    for (const mode of ["warm", "cold"] as const) expect((await simulate(fn, [], mode)).output).toBe("MessageTimeoutError");
  });
  it("a recorded result decodes the same whether its text is the engine's usual shape or not (the cold-replay fast path reads only the result's text)", async () => {
    const { ReplayRun, ReplayState } = await import("../../src/core/replay.ts");
    const { createWorkflowContext } = await import("../../src/core/operation.ts");
    const { toJson } = await import("../../src/core/serialization.ts");
    const fast = activity("fast_shape", async () => null);
    const replayed = async (json: string) => {
      const state = new ReplayState([{ id: 1, activityId: "fast_shape:1", eventType: "ActivityCompleted", data: { type: "json", json }, createdAt: new Date(0) }], {});
      let got: unknown = "unset";
      const fn = (async (ctx: WorkflowContext) => {
        got = await fast(ctx);
        return got;
      }) as never;
      const r = await new ReplayRun(fn, null, state, createWorkflowContext({ instanceId: "i", workflowName: "w", run: 1 }, state)).next();
      return { kind: r.outcome.kind, got, message: r.outcome.kind === "nondeterminism" ? r.outcome.error.message : null };
    };
    const at = new Date("2026-01-02T03:04:05.678Z");
    const result = { at, bytes: new Uint8Array([1, 2]), $tag: "escaped", list: [1, { $date: "user data" }] };
    const usual = toJson({ name: "fast_shape", result });
    expect(usual.startsWith('{"name":"fast_shape","result":')).toBe(true);
    for (const json of [usual, toJson({ name: "fast_shape", result, attempts: 3 }), ` ${usual}`, usual.replace('"result":', '"result" :')]) {
      const r = await replayed(json);
      expect(r.kind).toBe("completed");
      expect(r.got).toEqual(result);
    }
    expect((await replayed('{"name":"fast_shape","result":7,"attempts":2}')).got).toBe(7);
    expect((await replayed('{"name":"fast_shape","result":null}')).got).toBeNull();
    const other = await replayed(toJson({ name: "fast_shape_v2", result }));
    expect(other.kind).toBe("nondeterminism");
    expect(other.message).toMatch(/"fast_shape_v2".*"fast_shape"/);
  });

  it("counted ids and explicit ids never collide: an explicit id that reads like a counted one is escaped, and each is claimed once", async () => {
    const echo = activity("cnt_echo", async (_c, n: number) => n);
    const fn = (async (ctx: WorkflowContext) => Promise.all([echo(ctx, 1), echo.withId("cnt_echo:1")(ctx, 2), echo(ctx, 3)])) as never;
    for (const mode of ["warm", "cold"] as const) {
      const r = await simulate(fn, [], mode);
      expect(r.status).toBe("completed");
      expect(r.output).toEqual([1, 2, 3]);
      expect(r.history.map((h) => h.activityId).sort()).toEqual(["cnt_echo%3A1", "cnt_echo:1", "cnt_echo:2"]);
    }
  });
});
