// Test-time spans (testing/duration.ts), what `advance` and the kit's
// timeouts accept: seconds, or units w d h m s ms in any combination
// ("4d23h59m", "1.5h", "250ms"); a negative, empty or unreadable span is a
// TypeError that says how to write one.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { spanSeconds } from "../../src/testing/duration.ts";

describe("spans", () => {
  it("reads numbers and unit strings into seconds", () => {
    expect(spanSeconds(0)).toBe(0);
    expect(spanSeconds(90)).toBe(90);
    expect(spanSeconds("7d")).toBe(604_800);
    expect(spanSeconds("1w")).toBe(604_800);
    expect(spanSeconds("4d23h59m")).toBe(4 * 86_400 + 23 * 3600 + 59 * 60);
    expect(spanSeconds("1h30m")).toBe(5400);
    expect(spanSeconds("1.5h")).toBe(5400);
    expect(spanSeconds("250ms")).toBeCloseTo(0.25);
    expect(spanSeconds("1m1ms")).toBeCloseTo(60.001);
  });

  it("any sum of parts is the sum of their seconds", () => {
    const unit = fc.constantFrom(["w", 604_800], ["d", 86_400], ["h", 3600], ["m", 60], ["s", 1]);
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(1000), unit), { minLength: 1, maxLength: 5 }), (parts) => {
        const text = parts.map(([n, [u]]) => `${n}${u}`).join("");
        expect(spanSeconds(text as `${number}${string}`)).toBe(parts.reduce((s, [n, [, secs]]) => s + n * (secs as number), 0));
      }),
    );
  });

  it("refuses negative, infinite, empty and unreadable spans with a TypeError naming them", () => {
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => spanSeconds(bad)).toThrow(/finite number of seconds ≥ 0/);
    expect(() => spanSeconds("" as never)).toThrow(/a span is seconds or a string like "7d"/);
    for (const bad of ["7 days", "1x", "d", "-1d", "1h 30m", "1H"]) expect(() => spanSeconds(bad as never), bad).toThrow(/cannot read/);
  });
});
