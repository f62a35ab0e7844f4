// Payload encoding, pure (no database): any JSON value — including keys that
// look like the encoding's own tags (`$bytes`, `$date`, escaped `$$…`) and
// keys such as `__proto__` or `constructor` — round-trips unchanged, next to
// real bytes and dates; decoding what the database may hold never throws; and
// error classes are looked up by own property only; what is stored of an
// error and what the API shows of it.
import fc from "fast-check";
import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import { UnserializableValueError } from "../../src/core/errors.ts";
import { nextRetry, resolveRetryPolicy } from "../../src/core/retry.ts";
import {
  deserializeError,
  errorView,
  fromJson,
  fromPayload,
  historyDataView,
  instanceErrorView,
  serializeError,
  toJson,
  toPayload,
  toStoredJson,
  type SerializedError,
} from "../../src/core/serialization.ts";
import { TerminalError } from "../../src/core/errors.ts";

const hostileKey = fc.oneof(
  fc.constantFrom("$bytes", "$date", "$$bytes", "$$date", "$$$bytes", "$", "$$", "$binary", "__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "valueOf", "0", "", "$0"),
  fc.string().map((s) => `$${s}`),
  fc.string({ unit: "binary" }),
);
const hostileJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => (Object.is(n, -0) ? 0 : n)),
    fc.string({ unit: "binary" }),
    fc.constantFrom("!!!", "AAAA", "2020-01-01T00:00:00.000Z", "$bytes", "not a date"),
    fc.array(tie("value"), { maxLength: 4 }),
    tie("object"),
  ),
  // Built from entries so `__proto__` is an own key, as JSON.parse makes it.
  object: fc.array(fc.tuple(hostileKey, tie("value")), { maxLength: 4 }).map((entries) => Object.fromEntries(entries) as Record<string, unknown>),
}));
/** A hostile JSON value as a request body parser would hand it over. */
const arrivedOverHttp = hostileJson.value.map((v) => JSON.parse(JSON.stringify(v)) as unknown);

const withRealTags = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    arrivedOverHttp,
    fc.uint8Array({ maxLength: 16 }),
    fc.date({ noInvalidDate: true }),
    fc.array(tie("value"), { maxLength: 3 }),
    fc.array(fc.tuple(hostileKey, tie("value")), { maxLength: 3 }).map((e) => Object.fromEntries(e) as Record<string, unknown>),
  ),
})).value;

describe("payload encoding", () => {
  it("any JSON value with hostile keys and tag-like shapes round-trips unchanged", () => {
    fc.assert(
      fc.property(arrivedOverHttp, (v) => {
        const back = fromJson(toJson(v));
        // isDeepStrictEqual compares prototypes (vitest's toStrictEqual reads `.constructor`, a key here).
        expect(isDeepStrictEqual(back, v), JSON.stringify(v)).toBe(true);
        // The decoded value is plain JSON again: re-encoding it gives the same text.
        expect(JSON.stringify(back)).toBe(JSON.stringify(v));
      }),
      { numRuns: 2000 },
    );
  });

  it("real bytes and dates nested among hostile keys round-trip exactly", () => {
    fc.assert(
      fc.property(withRealTags, (v) => {
        expect(isDeepStrictEqual(fromPayload(toPayload(v)), v)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('the reported payload: {"$bytes":"!!!"} and friends are data, not tags', () => {
    for (const v of [{ $bytes: "!!!" }, { $bytes: "AAAA" }, { $date: "x" }, { $date: "2020-01-01T00:00:00.000Z" }, { $$bytes: "AAAA" }, [{ $bytes: "" }]]) {
      expect(isDeepStrictEqual(fromJson(toJson(v)), v)).toBe(true);
    }
  });

  it("decoding never throws on what the database may hold, however its tags look", () => {
    // Rows written before user keys were escaped, or damaged: a tag that does not decode stays an object.
    expect(fromJson('{"$bytes":"!!!"}')).toEqual({ $bytes: "!!!" });
    expect(fromJson('{"$date":"nope"}')).toEqual({ $date: "nope" });
    expect(fromJson('{"$bytes":5}')).toEqual({ $bytes: 5 });
    expect(fromJson('{"a":{"$bytes":"AQI="}}')).toEqual({ a: new Uint8Array([1, 2]) });
    fc.assert(
      fc.property(hostileJson.value, (v) => {
        expect(() => fromJson(JSON.stringify(v))).not.toThrow();
      }),
      { numRuns: 1000 },
    );
  });

  it("__proto__ and constructor stay own data properties and pollute nothing", () => {
    const v = JSON.parse('{"__proto__":{"polluted":true},"a":{"__proto__":{"$bytes":"AQ=="},"$x":1}}') as Record<string, unknown>;
    const back = fromJson(toJson(v)) as Record<string, Record<string, unknown>>;
    expect(Object.hasOwn(back, "__proto__")).toBe(true);
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.hasOwn(back.a!, "__proto__")).toBe(true);
    expect(back.a!.__proto__).toEqual({ $bytes: "AQ==" });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("deep nesting decodes without a recursive walk", () => {
    const deep = '{"$$k":'.repeat(20_000) + "1" + "}".repeat(20_000);
    let v = fromJson(deep) as Record<string, unknown>;
    for (let i = 0; i < 20_000; i++) v = v.$k as Record<string, unknown>;
    expect(v).toBe(1);
  });
});

describe("error classes", () => {
  it("names that are Object.prototype members restore as a plain Error, never as Object or a function", () => {
    for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "isPrototypeOf"]) {
      const err = deserializeError({ name, message: "m" }, {});
      expect(err).toBeInstanceOf(Error);
      expect(err.constructor).toBe(Error);
      expect(err.name).toBe(name);
      expect(err.message).toBe("m");
    }
  });

  it("known names restore their class; hostile field names are own properties", () => {
    const err = deserializeError({ name: "TerminalError", message: "no", fields: JSON.parse('{"__proto__":{"x":1},"code":7}') as Record<string, unknown> });
    expect(err).toBeInstanceOf(TerminalError);
    expect((err as unknown as { code: number }).code).toBe(7);
    expect(Object.getPrototypeOf(err)).toBe(TerminalError.prototype);
    expect(serializeError(err)).toMatchObject({ name: "TerminalError", fields: { code: 7 } });
  });
});

describe("what is stored of an error", () => {
  it("name, message, stack, cause chain and allow-listed primitive fields; never other enumerable fields", () => {
    const root = Object.assign(new Error("socket hang up"), { code: "ECONNRESET", config: { headers: { Authorization: "Bearer s3cret" } } });
    const err = Object.assign(new TypeError("request failed", { cause: root }), {
      status: 502,
      response: { data: "s3cret" },
      request: { headers: { authorization: "Bearer s3cret" } },
      attempts: { nested: true },
    });
    const s = serializeError(err);
    expect(JSON.stringify(s)).not.toContain("s3cret");
    expect(s).toMatchObject({ name: "TypeError", message: "request failed", fields: { status: 502 }, cause: { name: "Error", message: "socket hang up", fields: { code: "ECONNRESET" } } });
    expect(s.stack).toContain("request failed");
    expect(Object.keys(s.fields!)).toEqual(["status"]);
  });

  it("a cause chain is cut after five levels, also a cyclic one", () => {
    const a = new Error("a");
    const b = new Error("b", { cause: a });
    (a as { cause?: unknown }).cause = b;
    let depth = 0;
    for (let s: SerializedError | undefined = serializeError(a); s; s = s.cause) depth++;
    expect(depth).toBe(6);
  });

  it("views show type, message and the cause chain; a stack only when asked; old rows' arbitrary fields are dropped", () => {
    const stored = { name: "Error", message: "top", stack: "Error: top\n    at x (/srv/app.js:1:1)", fields: { code: "E1", config: { auth: "s3cret" } }, cause: { name: "RangeError", message: "inner", stack: "RangeError: inner" } };
    expect(errorView(stored)).toEqual({ name: "Error", message: "top", fields: { code: "E1" }, cause: { name: "RangeError", message: "inner" } });
    expect(errorView(stored, { stacks: true })).toMatchObject({ stack: stored.stack, cause: { stack: "RangeError: inner" } });
    const data = { error_type: "Error", error_message: "top", stack: "s", cause: stored, extra: "x" };
    expect(instanceErrorView(data)).toEqual({ error_type: "Error", error_message: "top", cause: errorView(stored) });
    expect(historyDataView({ name: "act", error: stored, attempt: 2 })).toEqual({ name: "act", error: errorView(stored), attempt: 2 });
    expect(errorView("garbage")).toEqual({ name: "Error", message: "" });
  });
});

describe("values JSON cannot hold", () => {
  class Money {
    toJSON(): never {
      throw new Error("no JSON form");
    }
  }
  const cyclic = () => {
    const o: Record<string, unknown> = {};
    o.self = o;
    return o;
  };
  const unstorable = fc.constantFrom<() => unknown>(
    () => BigInt(1),
    cyclic,
    () => () => 1,
    () => Symbol("s"),
    () => new Money(),
  );
  /** `value` with `leaf` put at a path chosen by `pick` (into an array, an object, or in place of it). */
  const plant = (value: unknown, leaf: unknown, pick: number[]): unknown => {
    if (pick.length === 0 || value === null || typeof value !== "object") return Array.isArray(value) ? [...value, leaf] : { planted: leaf, was: value };
    const [i, ...rest] = pick;
    if (Array.isArray(value)) return value.length === 0 ? [leaf] : value.map((v, k) => (k === i! % value.length ? plant(v, leaf, rest) : v));
    const keys = Object.keys(value);
    if (keys.length === 0) return { planted: leaf };
    const key = keys[i! % keys.length]!;
    return Object.fromEntries(keys.map((k) => [k, k === key ? plant((value as Record<string, unknown>)[k], leaf, rest) : (value as Record<string, unknown>)[k]]));
  };

  it("anywhere in a JSON value, one is refused with an UnserializableValueError naming the slot; the value without it is stored", () => {
    fc.assert(
      fc.property(fc.jsonValue(), unstorable, fc.array(fc.nat(), { maxLength: 6 }), (value, make, pick) => {
        expect(() => toStoredJson(value, "the slot")).not.toThrow();
        let thrown: unknown;
        try {
          toStoredJson(plant(value, make(), pick), "the slot");
        } catch (e) {
          thrown = e;
        }
        expect(thrown).toBeInstanceOf(UnserializableValueError);
        expect((thrown as UnserializableValueError).slot).toBe("the slot");
        expect((thrown as UnserializableValueError).message).toMatch(/^the slot cannot be stored as JSON: /);
        expect((thrown as UnserializableValueError).cause).toBeInstanceOf(Error);
      }),
      { numRuns: 300 },
    );
  });

  it("a stored UnserializableValueError restores as its class with its slot, and is never retried", () => {
    const restored = deserializeError(serializeError(new UnserializableValueError("x cannot be stored as JSON: y", "x")));
    expect(restored).toBeInstanceOf(UnserializableValueError);
    expect((restored as UnserializableValueError).slot).toBe("x");
    expect(restored.name).toBe("UnserializableValueError");
    expect(nextRetry(resolveRetryPolicy({ maxAttempts: 5 }), 1, restored.name, 0)).toEqual({ retry: false, exhausted: false });
  });
});
