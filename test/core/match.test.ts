// normalizeMatch: the one place a waitEvent match is checked and shaped like
// the stored message document (pure, no database).
import { describe, expect, it } from "vitest";
import { normalizeMatch } from "../../src/core/match.ts";

describe("normalizeMatch", () => {
  it("attributes go to meta as ce_*, data paths nest under data, $-keys escaped as payloads are", () => {
    expect(normalizeMatch({ subject: "o1", tenant: "t", "data.orderId": "o1", "data.customer.id": 7, "data.$kind": true })).toEqual({
      meta: { ce_subject: "o1", ce_tenant: "t" },
      data: { orderId: "o1", customer: { id: 7 }, $$kind: true },
    });
    expect(normalizeMatch(undefined)).toBeUndefined();
  });

  it.each([
    [{}, /at least one key/],
    [{ Subject: "x" }, /neither a CloudEvent attribute/],
    [{ data: "x" }, /neither a CloudEvent attribute/],
    [{ "data.": "x" }, /empty path segment/],
    [{ "data.a": 1, "data.a.b": 2 }, /conflicts/],
    [{ "data.a.b": 1, "data.a": 2 }, /conflicts/],
    [{ subject: { nested: 1 } }, /must be a string/],
    [{ subject: Number.NaN }, /must be a string/],
    [{ subject: "x".repeat(1025) }, /must be a string/],
  ])("refuses %j", (match, message) => {
    expect(() => normalizeMatch(match as never)).toThrow(message);
  });
});
