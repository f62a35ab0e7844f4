// The viewer's pure pieces, no database: history → timeline (failed attempts,
// retry backoffs, timers, messages, timeouts, compensations, each with the
// time since the previous entry), cause chains, the form → input conversion.
import { describe, expect, it } from "vitest";
import { toPayload, serializeError } from "../../src/core/serialization.ts";
import { RetryExhaustedError } from "../../src/core/errors.ts";
import type { HistoryEvent } from "../../src/storage/types.ts";
import { buildTimeline, causeChain } from "../../src/http/ui/timeline.ts";
import { readInput, type Field } from "../../src/http/ui/forms.tsx";
import fc from "fast-check";
import { boundedJson, formatDuration, Oversized, preview, VALUE_MAX_CHARS } from "../../src/http/ui/format.ts";

const t0 = new Date("2026-01-01T00:00:00.000Z");
let id = 0;
const ev = (activityId: string, eventType: string, data: unknown, ms: number): HistoryEvent => ({
  id: ++id,
  activityId,
  eventType,
  data: toPayload(data),
  createdAt: new Date(t0.getTime() + ms),
});

describe("timeline", () => {
  it("shows failed attempts, retry backoffs and the final outcome in order, with time since the previous entry", () => {
    const boom = serializeError(new TypeError("connection reset"));
    const history = [
      ev("charge:1#1", "ActivityAttemptFailed", { name: "charge", error: boom, attempt: 1, retryInSeconds: 1 }, 100),
      ev("charge:1#retry1", "TimerExpired", { timer_id: "charge:1#retry1" }, 1150),
      ev("charge:1#2", "ActivityAttemptFailed", { name: "charge", error: boom, attempt: 2, retryInSeconds: 2 }, 1250),
      ev("charge:1#retry2", "TimerExpired", { timer_id: "charge:1#retry2" }, 3300),
      ev("charge:1", "ActivityCompleted", { name: "charge", result: { ok: true }, attempts: 3 }, 3400),
      ev("sleep:1", "TimerExpired", { timer_id: "sleep:1" }, 63_400),
      ev("receive_approval:1", "MessageReceived", { channel: "approval", data: { approved: true } }, 64_000),
      ev("receive_jobs:1", "MessageTimeout", { channel: "jobs" }, 94_000),
      ev("compensate:compensation:1", "CompensationExecuted", { name: "refund", result: 1 }, 94_100),
      ev("compensate:compensation:2", "CompensationFailed", { name: "release", error: boom }, 94_200),
    ];
    const tl = buildTimeline(history, t0);
    expect(tl.map((e) => [e.kind, e.name, e.note, e.bad])).toEqual([
      ["attempt", "charge", "attempt 1 failed, retry in 1 s", true],
      ["retry", "charge", "backoff before attempt 2 elapsed", false],
      ["attempt", "charge", "attempt 2 failed, retry in 2 s", true],
      ["retry", "charge", "backoff before attempt 3 elapsed", false],
      ["activity", "charge", "after 3 attempts", false],
      ["timer", "sleep", "timer fired", false],
      ["message", "approval", "message received", false],
      ["timeout", "jobs", "timed out", true],
      ["compensation", "refund", "compensated", false],
      ["compensation-failed", "release", "compensation failed", true],
    ]);
    expect(tl.map((e) => e.sinceMs)).toEqual([100, 1050, 100, 2050, 100, 60_000, 600, 30_000, 100, 100]);
    expect(tl[0]!.error).toMatchObject({ name: "TypeError", message: "connection reset" });
    expect(tl[4]!.detail).toEqual({ ok: true });
    expect(formatDuration(60_000)).toBe("1 min 0 s");
  });

  it("follows an error's causes, outermost first", () => {
    const err = serializeError(new RetryExhaustedError("gave up after 5 attempts", 5, { cause: new TypeError("connection reset", { cause: new Error("ECONNRESET") }) }));
    expect(causeChain(err).map((e) => `${e.name}: ${e.message}`)).toEqual(["RetryExhaustedError: gave up after 5 attempts", "TypeError: connection reset", "Error: ECONNRESET"]);
    expect(causeChain(null)).toEqual([]);
  });
});

describe("start form input", () => {
  const fields: Field[] = [
    { name: "orderId", kind: "string", required: true },
    { name: "amount", kind: "number", required: true },
    { name: "failAt", kind: "enum", required: false, options: ["payment", "shipping"] },
    { name: "express", kind: "boolean", required: false },
    { name: "items", kind: "json", required: false },
  ];

  it("converts fields by kind and leaves blank optional ones out", () => {
    expect(readInput(fields, { "in.orderId": "o1", "in.amount": "42.5", "in.failAt": "", "in.items": "" })).toEqual({ input: { orderId: "o1", amount: 42.5, express: false } });
    expect(readInput(fields, { "in.orderId": "o1", "in.amount": "1", "in.express": "on", "in.items": '[{"sku":"a"}]' })).toEqual({
      input: { orderId: "o1", amount: 1, express: true, items: [{ sku: "a" }] },
    });
  });

  it("keeps a non-number for the schema to refuse, reports bad JSON and missing required fields", () => {
    expect(readInput(fields, { "in.orderId": "o1", "in.amount": "ten" })).toEqual({ input: { orderId: "o1", amount: "ten", express: false } });
    expect(readInput(fields, { "in.orderId": "o1", "in.amount": "", "in.items": "[1," })).toEqual({
      issues: [
        { path: ["amount"], message: "required" },
        { path: ["items"], message: "not valid JSON" },
      ],
    });
  });

  it("prefers the raw JSON box, and reads it alone when the input is not an object", () => {
    expect(readInput(fields, { "in.orderId": "ignored", __json: '{"orderId":"raw","amount":2}' })).toEqual({ input: { orderId: "raw", amount: 2 } });
    expect(readInput(null, { __json: "[1,2]" })).toEqual({ input: [1, 2] });
    expect(readInput(null, { __json: "" })).toEqual({ input: undefined });
    expect(readInput(null, { __json: "nope" })).toEqual({ issues: [{ message: "the input is not valid JSON" }] });
  });
});

describe("bounded JSON for pages", () => {
  it("untruncated, it is exactly JSON.stringify(value, null, 2)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const r = boundedJson(v, { maxChars: 10_000_000, maxDepth: 10_000 });
        expect(r.truncated).toBe(false);
        expect(r.text).toBe(JSON.stringify(v, null, 2));
      }),
    );
  });

  it("never exceeds its budget, and says when it cut", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 1, max: 200 }), fc.integer({ min: 0, max: 5 }), (v, maxChars, maxDepth) => {
        const r = boundedJson(v, { maxChars, maxDepth });
        expect(r.text.length).toBeLessThanOrEqual(maxChars + 1);
        if (!r.truncated) expect(r.text).toBe(JSON.stringify(v, null, 2));
      }),
    );
  });

  it("a value of 500 nested arrays costs its first kilobytes, not hundreds of megabytes", () => {
    let v: unknown[] = [];
    for (let i = 0; i < 500; i++) v = [v, ...new Array<number>(900).fill(0)];
    const r = boundedJson(v);
    expect(r.truncated).toBe(true);
    expect(r.text.length).toBeLessThanOrEqual(VALUE_MAX_CHARS + 1);
    expect(preview(v, 80).length).toBeLessThanOrEqual(80);
    expect(boundedJson(new Oversized(2_000_000)).text).toContain("too large to show here");
  });
});
