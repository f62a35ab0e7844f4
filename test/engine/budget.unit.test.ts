// One subrequest budget per invocation (engine/budget.ts): follow-ups, outbox
// deliveries and queue sends take from the same count, a take that would pass
// the limit takes nothing (the work stays in the database for a later
// invocation), a send that never left gives its share back; and the
// platform's "too many subrequests" error is recognised by its words.
import { describe, expect, it } from "vitest";
import { isSubrequestLimitError, SubrequestBudget } from "../../src/engine/budget.ts";

describe("subrequest budget", () => {
  it("takes while there is enough, all or nothing; refunds never go below zero", () => {
    const b = new SubrequestBudget(5);
    expect(b.take(3)).toBe(true);
    expect(b.take(3)).toBe(false);
    expect({ spent: b.spent, remaining: b.remaining }).toEqual({ spent: 3, remaining: 2 });
    expect(b.take()).toBe(true);
    expect(b.take(1)).toBe(true);
    expect(b.take()).toBe(false);
    b.refund(2);
    expect(b.remaining).toBe(2);
    b.refund(100);
    expect({ spent: b.spent, remaining: b.remaining }).toEqual({ spent: 0, remaining: 5 });
  });

  it("no limit (Node, Deno) never refuses; a limit of 0 refuses every take; a negative or NaN limit is a TypeError", () => {
    const free = new SubrequestBudget();
    for (let i = 0; i < 1000; i++) expect(free.take(50)).toBe(true);
    expect(free.remaining).toBe(Infinity);
    expect(new SubrequestBudget(0).take()).toBe(false);
    expect(() => new SubrequestBudget(-1)).toThrow(TypeError);
    expect(() => new SubrequestBudget(Number.NaN)).toThrow(TypeError);
  });

  it("recognises the platform's subrequest-limit errors and nothing else", () => {
    expect(isSubrequestLimitError(new Error("Too many subrequests."))).toBe(true);
    expect(isSubrequestLimitError(new TypeError("Subrequest limit reached for this invocation"))).toBe(true);
    expect(isSubrequestLimitError("exceeded the number of allowed subrequests")).toBe(true);
    expect(isSubrequestLimitError(new Error("fetch failed"))).toBe(false);
    expect(isSubrequestLimitError(undefined)).toBe(false);
  });
});
