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

/** Pretty JSON for display; bytes as a short base64 note. */
export function prettyJson(value: unknown): string {
  try {
    return (
      JSON.stringify(
        value,
        (_k, v: unknown) => (v instanceof Uint8Array ? { $bytes: v.length > 64 ? `${toBase64(v.subarray(0, 64))}… (${v.length} bytes)` : toBase64(v) } : v),
        2,
      ) ?? "null"
    );
  } catch {
    return String(value);
  }
}

/** One-line JSON, cut to `max` characters. */
export function preview(value: unknown, max = 120): string {
  let s: string;
  try {
    s = JSON.stringify(value, (_k, v: unknown) => (v instanceof Uint8Array ? `<${v.length} bytes>` : v)) ?? "null";
  } catch {
    s = String(value);
  }
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** Parse stored JSON text leniently (the viewer shows whatever is there). */
export function parseStored(text: string | null): unknown {
  if (text === null) return null;
  try {
    return fromJson(text);
  } catch {
    return text;
  }
}
