// Flow-control options (core/flow-control.ts), pure: bad `concurrency`,
// `rateLimit`, `debounce` and `singleton` options are TypeErrors when the
// workflow is defined, and the combinations one queue per instance cannot
// honour are refused; a start's key is `{workflow}:{key(input)}`, and a key
// function that throws or returns no usable string is a ValidationError —
// over HTTP a 422 answered before anything is stored. (The definition checks
// moved from test/engine/rate-limit.test.ts and debounce-singleton.test.ts,
// which keep the queues on real Postgres.)
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ValidationError } from "../../src/core/errors.ts";
import { flowKey, MAX_FLOW_PERIOD_SECONDS } from "../../src/core/flow-control.ts";
import { workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const fn = async () => null;

describe("flow-control options", () => {
  it("rateLimit: bad options are TypeErrors at definition, and it cannot be combined with concurrency", () => {
    const key = (i: { a: string }) => i.a;
    expect(() => workflow("rl_bad", { rateLimit: { key, limit: 0, periodSeconds: 1 } }, fn)).toThrow(TypeError);
    expect(() => workflow("rl_bad", { rateLimit: { key, limit: 1.5, periodSeconds: 1 } }, fn)).toThrow(TypeError);
    expect(() => workflow("rl_bad", { rateLimit: { key, limit: 1, periodSeconds: 0 } }, fn)).toThrow(TypeError);
    expect(() => workflow("rl_bad", { rateLimit: { key, limit: 1, periodSeconds: Number.NaN } }, fn)).toThrow(TypeError);
    expect(() => workflow("rl_bad", { rateLimit: { key, limit: 1, periodSeconds: MAX_FLOW_PERIOD_SECONDS + 1 } }, fn)).toThrow(TypeError);
    expect(() => workflow("rl_bad", { rateLimit: { key: "a" as unknown as typeof key, limit: 1, periodSeconds: 1 } }, fn)).toThrow(TypeError);
    expect(() => workflow("rl_bad", { rateLimit: { key, limit: 1, periodSeconds: 1 }, concurrency: { key, limit: 1 } }, fn)).toThrow(/cannot be combined/);
    expect(() => workflow("rl_ok", { rateLimit: { key, limit: 2, periodSeconds: MAX_FLOW_PERIOD_SECONDS } }, fn)).not.toThrow();
  });

  it("debounce and singleton: bad options are TypeErrors at definition; debounce combines with nothing", () => {
    const key = () => "k";
    expect(() => workflow("ds_bad", { debounce: { key, periodSeconds: 0 } }, fn)).toThrow(TypeError);
    expect(() => workflow("ds_bad", { debounce: { key, periodSeconds: 2, maxWaitSeconds: 1 } }, fn)).toThrow(TypeError);
    expect(() => workflow("ds_bad", { debounce: { key, periodSeconds: 1 }, singleton: { key } }, fn)).toThrow(/cannot be combined/);
    expect(() => workflow("ds_bad", { singleton: {} as { key: () => string } }, fn)).toThrow(TypeError);
    expect(() => workflow("cc_bad", { concurrency: { key, limit: -1 } }, fn)).toThrow(/concurrency must be/);
  });

  it("a start's key is prefixed with its workflow; a key that throws, is not a string, is empty or over 200 characters is a ValidationError", () => {
    expect(flowKey("w", "concurrency", (i: { a: string }) => i.a, { a: "x" })).toBe("w:x");
    expect(flowKey("w", "singleton", () => "k".repeat(200), {})).toBe(`w:${"k".repeat(200)}`);
    const refused = (key: (input: unknown) => string) => {
      try {
        flowKey("w", "rateLimit", key, {});
      } catch (e) {
        return e;
      }
      return null;
    };
    for (const key of [() => (null as unknown as { x: string }).x, () => 42 as unknown as string, () => "", () => "x".repeat(201)]) {
      const e = refused(key);
      expect(e).toBeInstanceOf(ValidationError);
      expect((e as ValidationError).message).toMatch(/^workflow "w": rateLimit\.key\(input\) /);
      expect((e as ValidationError).issues).toEqual([{ path: ["input"], message: "invalid rateLimit key" }]);
    }
  });

  it("over HTTP a key that throws is a 422 naming it, answered before the database is asked for anything", async () => {
    const hostile = workflow("rl_hostile", { input: z.object({ k: z.unknown() }), rateLimit: { key: (i: { k: unknown }) => (i.k === "throw" ? (null as unknown as { x: string }).x : (i.k as string)), limit: 1, periodSeconds: 60 } }, fn);
    const t = appWithoutDatabase({ workflows: [hostile] });
    try {
      const res = await t.request("/workflows/rl_hostile/instances", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { k: "throw" } }) });
      expect(res.status).toBe(422);
      expect(await res.text()).toMatch(/rateLimit\.key\(input\) threw/);
      expect(t.touched).toEqual([]);
    } finally {
      await t.edda.close();
    }
  });
});
