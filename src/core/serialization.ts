/**
 * Values ⇄ stored payloads, and errors ⇄ JSON.
 *
 * A top-level Uint8Array is stored as bytes (bytea); anything else as JSON text.
 * Nested Uint8Arrays and Dates inside JSON are tagged so they round-trip
 * exactly (`{"$bytes": base64}`, `{"$date": iso}`). Errors keep their name,
 * message, stack, cause and own enumerable fields, and are restored as the same
 * class when the name is a known one (built-in or registered).
 */
import type { Payload } from "../storage/types.ts";
import { BUILTIN_ERRORS } from "./errors.ts";

const BYTES = "$bytes";
const DATE = "$date";

export function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

export function fromBase64(b64: string): Uint8Array {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

export function toJson(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value, function (this: unknown, key, v: unknown) {
    const raw = (this as Record<string, unknown>)[key];
    if (raw instanceof Uint8Array) return { [BYTES]: toBase64(raw) };
    if (raw instanceof Date) return { [DATE]: raw.toISOString() };
    return v;
  });
}

export function fromJson(text: string): unknown {
  // The reviver is the costly part of replay; skip it when nothing is tagged.
  if (!text.includes(`"${BYTES}"`) && !text.includes(`"${DATE}"`)) return JSON.parse(text);
  return JSON.parse(text, (_key, v: unknown) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      const keys = Object.keys(o);
      if (keys.length === 1) {
        if (typeof o[BYTES] === "string") return fromBase64(o[BYTES]);
        if (typeof o[DATE] === "string") return new Date(o[DATE]);
      }
    }
    return v;
  });
}

export function toPayload(value: unknown): Payload {
  if (value instanceof Uint8Array) return { type: "binary", bytes: value };
  return { type: "json", json: toJson(value) };
}

export function fromPayload(p: Payload): unknown {
  return p.type === "binary" ? p.bytes : fromJson(p.json);
}

export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
  cause?: SerializedError;
  fields?: Record<string, unknown>;
}

export function serializeError(err: unknown, depth = 0): SerializedError {
  if (!(err instanceof Error)) {
    return { name: "Error", message: typeof err === "string" ? err : safeString(err) };
  }
  const out: SerializedError = { name: err.name || "Error", message: err.message };
  if (err.stack) out.stack = err.stack;
  if (err.cause !== undefined && depth < 5) out.cause = serializeError(err.cause, depth + 1);
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(err)) {
    if (k === "name" || k === "message" || k === "stack" || k === "cause") continue;
    try {
      JSON.stringify(v);
      fields[k] = v;
    } catch {
      /* not serializable: dropped */
    }
  }
  if (Object.keys(fields).length) out.fields = fields;
  return out;
}

export type ErrorClass = new (message: string) => Error;

export function deserializeError(s: SerializedError, registry: Record<string, ErrorClass> = {}): Error {
  const Cls = registry[s.name] ?? BUILTIN_ERRORS[s.name] ?? Error;
  let err: Error;
  try {
    err = new Cls(s.message);
  } catch {
    err = new Error(s.message);
  }
  if (s.fields) Object.assign(err, s.fields);
  Object.defineProperty(err, "name", { value: s.name, writable: true, configurable: true, enumerable: false });
  if (s.stack) err.stack = s.stack;
  if (s.cause) Object.defineProperty(err, "cause", { value: deserializeError(s.cause, registry), writable: true, configurable: true });
  return err;
}

function safeString(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
