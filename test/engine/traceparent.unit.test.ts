// W3C trace context (engine/tracing.ts): the traceparent a follow-up request
// carries (and the step route validates with TRACEPARENT_PATTERN) is written
// from a span context and read back as the same remote parent; an all-zero
// trace or span id, another version or a malformed header is no parent.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatTraceparent, parseTraceparent, TRACEPARENT_PATTERN } from "../../src/engine/tracing.ts";

const hex = (n: number) => fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), minLength: n, maxLength: n });

describe("traceparent", () => {
  it("format then parse is the same context, remote, for every valid trace and span id and flags byte", () => {
    fc.assert(
      fc.property(hex(32).filter((s) => !/^0+$/.test(s)), hex(16).filter((s) => !/^0+$/.test(s)), fc.integer({ min: 0, max: 255 }), (traceId, spanId, traceFlags) => {
        const tp = formatTraceparent({ traceId, spanId, traceFlags });
        expect(tp).toMatch(TRACEPARENT_PATTERN);
        expect(parseTraceparent(tp)).toEqual({ traceId, spanId, traceFlags, isRemote: true });
      }),
    );
  });

  it("the W3C example parses; invalid ones are no parent", () => {
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toEqual({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1, isRemote: true });
    for (const tp of [
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
      "",
      null,
      undefined,
    ]) expect(parseTraceparent(tp), String(tp)).toBeNull();
    expect(formatTraceparent({ traceId: "0".repeat(32), spanId: "00f067aa0ba902b7", traceFlags: 1 })).toBeNull();
    expect(formatTraceparent({ traceId: "xyz", spanId: "00f067aa0ba902b7", traceFlags: 1 })).toBeNull();
  });
});
