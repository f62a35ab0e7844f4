/**
 * Small pure formatters for the viewer: times, durations, JSON previews.
 * Everything returns plain strings; the JSX layer escapes them.
 */
import { fromJson, toBase64 } from "../../core/serialization.ts";

/** `2026-11-30 16:32:10.123` (UTC). */
export function formatTime(d: Date | string | null | undefined): string {
  if (!d) return "—";
  const date = typeof d === "string" ? new Date(d) : d;
  if (Number.isNaN(date.getTime())) return String(d);
  return date.toISOString().replace("T", " ").replace("Z", "");
}

/** `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 4 min`, `3 d 1 h`. */
export function formatDuration(ms: number): string {
  const sign = ms < 0 ? "-" : "";
  const a = Math.abs(ms);
  if (a < 1000) return `${sign}${Math.round(a)} ms`;
  if (a < 60_000) return `${sign}${(a / 1000).toFixed(a < 10_000 ? 1 : 0)} s`;
  const s = Math.round(a / 1000);
  if (s < 3600) return `${sign}${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${sign}${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${sign}${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

/** `in 42 s` / `3 min ago`, relative to `now`. */
export function relative(d: Date, now: Date): string {
  const ms = d.getTime() - now.getTime();
  return ms >= 0 ? `in ${formatDuration(ms)}` : `${formatDuration(-ms)} ago`;
}

/** A stored value too large to parse for a page. */
export class Oversized {
  constructor(readonly chars: number) {}
}

/** `12.3 KB`, `4.1 MB`. */
export function formatSize(chars: number): string {
  if (chars < 1024) return `${chars} B`;
  if (chars < 1024 * 1024) return `${(chars / 1024).toFixed(1)} KB`;
  return `${(chars / 1024 / 1024).toFixed(1)} MB`;
}

/** Characters a rendered value may take on a page, and nesting levels shown. */
export const VALUE_MAX_CHARS = 4000;
export const VALUE_MAX_DEPTH = 12;

/** A bounded rendering: the text, and whether anything was left out (then the page links the raw JSON). */
export interface Bounded {
  text: string;
  truncated: boolean;
}

class Full extends Error {}

const bytesNote = (v: Uint8Array) => (v.length > 64 ? `${toBase64(v.subarray(0, 64))}… (${v.length} bytes)` : toBase64(v));

/**
 * JSON for display, cut at `maxChars` characters and `maxDepth` levels. It
 * writes as it walks and stops at the budget, so the work is bounded by the
 * output, not by the value: a message of 500 nested arrays costs what its
 * first few kilobytes cost. Untruncated, `indent` 2 gives exactly
 * `JSON.stringify(value, null, 2)` (bytes as a short base64 note).
 */
export function boundedJson(value: unknown, opts: { maxChars?: number; maxDepth?: number; indent?: number } = {}): Bounded {
  const maxChars = opts.maxChars ?? VALUE_MAX_CHARS;
  const maxDepth = opts.maxDepth ?? VALUE_MAX_DEPTH;
  const step = opts.indent ?? 2;
  const parts: string[] = [];
  let length = 0;
  let truncated = false;
  const put = (s: string) => {
    const room = maxChars - length;
    if (s.length > room) {
      parts.push(s.slice(0, Math.max(0, room)));
      truncated = true;
      throw new Full();
    }
    parts.push(s);
    length += s.length;
  };
  const nl = (depth: number) => (step > 0 ? `\n${" ".repeat(step * depth)}` : "");
  const sep = step > 0 ? ": " : ":";
  const seen = new Set<object>();
  const walk = (v: unknown, depth: number): boolean => {
    if (v instanceof Oversized) {
      put(JSON.stringify(`${formatSize(v.chars)} of JSON, too large to show here`));
      truncated = true;
      return true;
    }
    if (v instanceof Uint8Array) v = { $bytes: bytesNote(v) };
    if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") v = (v as { toJSON: () => unknown }).toJSON();
    if (v === undefined || typeof v === "function" || typeof v === "symbol") return false;
    if (v === null || typeof v !== "object") {
      // A long string is cut before it is escaped: the work stays bounded by the budget.
      const s = typeof v === "string" && v.length > maxChars ? v.slice(0, maxChars) : v;
      put(typeof s === "bigint" ? String(s) : typeof s === "number" && !Number.isFinite(s) ? "null" : JSON.stringify(s));
      return true;
    }
    if (seen.has(v)) {
      put('"[circular]"');
      return true;
    }
    const isArray = Array.isArray(v);
    // Walked lazily: a million-element array costs only the elements shown.
    const arr = v as unknown[];
    const obj = v as Record<string, unknown>;
    const keys = isArray ? null : Object.keys(obj);
    const count = isArray ? arr.length : keys!.length;
    if (count === 0) {
      put(isArray ? "[]" : "{}");
      return true;
    }
    if (depth >= maxDepth) {
      put(isArray ? "[…]" : "{…}");
      truncated = true;
      return true;
    }
    seen.add(v);
    put(isArray ? "[" : "{");
    let first = true;
    for (let i = 0; i < count; i++) {
      const x = isArray ? arr[i] : obj[keys![i]!];
      if (!isArray && (x === undefined || typeof x === "function" || typeof x === "symbol")) continue;
      put(first ? nl(depth + 1) : `,${nl(depth + 1)}`);
      first = false;
      if (!isArray) put(JSON.stringify(keys![i]) + sep);
      if (!walk(x, depth + 1)) put("null");
    }
    seen.delete(v);
    put(first ? (isArray ? "]" : "}") : `${nl(depth)}${isArray ? "]" : "}"}`);
    return true;
  };
  try {
    if (!walk(value, 0)) put("null");
  } catch (err) {
    if (!(err instanceof Full)) return { text: String(value).slice(0, maxChars), truncated: true };
    parts.push("…");
  }
  return { text: parts.join(""), truncated };
}

/** Pretty JSON for display, bounded (size and depth); `truncated` says the page should link the raw JSON. */
export function prettyJson(value: unknown): Bounded {
  return boundedJson(value);
}

/** Text cut to `max` characters (error messages, stacks, names). */
export function clip(text: string, max = 2000): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** One-line JSON, cut to `max` characters. */
export function preview(value: unknown, max = 120): string {
  const { text, truncated } = boundedJson(value, { maxChars: max - 1, indent: 0, maxDepth: 4 });
  return truncated && !text.endsWith("…") ? `${text}…` : text;
}

/**
 * Stored JSON text longer than this is not parsed for a page: parsing costs
 * what the whole value costs, and the page would show only its first few
 * kilobytes. Such a value is shown as its size with a link to the raw JSON.
 */
export const PARSE_MAX_CHARS = 64 * 1024;

/** Parse stored JSON text leniently (the viewer shows whatever is there); too long → Oversized. */
export function parseStored(text: string | null, maxChars = PARSE_MAX_CHARS): unknown {
  if (text === null) return null;
  if (text.length > maxChars) return new Oversized(text.length);
  try {
    return fromJson(text);
  } catch {
    return text;
  }
}
