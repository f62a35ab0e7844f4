/**
 * Test-time spans: a number of seconds, or a string of units — `"7d"`,
 * `"1h30m"`, `"90s"`, `"250ms"` (w, d, h, m, s, ms). Pure.
 */
export type Span = number | `${number}${string}`;

const UNIT_SECONDS: Record<string, number> = { w: 604_800, d: 86_400, h: 3_600, m: 60, s: 1, ms: 0.001 };
const PART = /(\d+(?:\.\d+)?)(ms|w|d|h|m|s)/gy;

/** The span in seconds; a TypeError names what it cannot read (negative, empty, unknown units). */
export function spanSeconds(span: Span): number {
  if (typeof span === "number") {
    if (!Number.isFinite(span) || span < 0) throw new TypeError(`advance: a span must be a finite number of seconds ≥ 0, got ${span}`);
    return span;
  }
  if (typeof span !== "string" || span.length === 0) throw new TypeError(`advance: a span is seconds or a string like "7d" or "1h30m", got ${JSON.stringify(span)}`);
  PART.lastIndex = 0;
  let total = 0;
  let read = 0;
  for (let m = PART.exec(span); m; m = PART.exec(span)) {
    total += Number(m[1]) * UNIT_SECONDS[m[2]!]!;
    read = PART.lastIndex;
  }
  if (read !== span.length) throw new TypeError(`advance: cannot read ${JSON.stringify(span)} (units: w, d, h, m, s, ms — e.g. "7d", "1h30m")`);
  return total;
}
