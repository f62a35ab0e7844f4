/**
 * Values ⇄ stored payloads, and errors ⇄ JSON.
 *
 * A top-level Uint8Array is stored as bytes (bytea); anything else as JSON text.
 * Nested Uint8Arrays and Dates inside JSON are tagged so they round-trip
 * exactly: `{"$bytes": base64}`, `{"$date": iso}`; `{"$enc": base64}` is a
 * value sealed at rest (payload-codec.ts), opened before decoding.
 *
 * User data can never be mistaken for a tag: every object key of user data
 * that starts with `$` is stored with one more `$` (`$bytes` → `$$bytes`,
 * `$$x` → `$$$x`), so a one-key object whose key is exactly `$bytes` or
 * `$date` is always ours. Decoding strips the extra `$`. Decoding never
 * throws on what the database holds: a tag whose content does not decode
 * (data written before escaping existed, or damaged) stays a plain object.
 * Keys such as `__proto__` and `constructor` are own data properties on both
 * sides (JSON.parse and `Object.fromEntries` define, never assign).
 *
 * Errors are stored as name, message, stack, a few allow-listed primitive
 * fields and the cause chain (see `serializeError`) — never an error's other
 * enumerable fields. They are restored as the same class when the name is a
 * known one (built-in or registered, looked up by own property only). The API
 * shows them through `errorView`: no stack unless the deployment asks for it.
 */
import type { Payload } from "./model.ts";
import { BUILTIN_ERRORS, PayloadTooLargeError, UnserializableValueError } from "./errors.ts";

/**
 * The largest value Edda stores, in UTF-16 units of its JSON text (bytes for
 * a Uint8Array): past it, storing fails with PayloadTooLargeError naming the
 * value. Values over the large-value threshold (256 KiB) go by reference.
 */
export const MAX_VALUE_BYTES = 32 * 1024 * 1024;

function checkSize(size: number, slot: string): void {
  if (size > MAX_VALUE_BYTES) {
    throw new PayloadTooLargeError(`${slot} is ${(size / 1048576).toFixed(1)} MiB; the largest value Edda stores is ${MAX_VALUE_BYTES / 1048576} MiB`, slot, MAX_VALUE_BYTES);
  }
}

const BYTES = "$bytes";
const DATE = "$date";
/** A value sealed at rest (core/payload-codec.ts). */
const SEALED = "$enc";
const DOLLAR = 36; // "$"

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

/**
 * A sealed value (`{"$enc": …}`, core/payload-codec.ts) met unopened: the
 * database copied it into another record (a broadcast message into the
 * history of its receivers). Kept as it is, so encoding it again writes the
 * same envelope, and opened with the record that holds it when it is read.
 */
export class SealedValue {
  constructor(readonly sealed: string) {}
}

const isPlainRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Date);

function hasDollarKey(o: object): boolean {
  for (const k of Object.keys(o)) if (k.charCodeAt(0) === DOLLAR) return true;
  return false;
}

/** The object with every `$`-prefixed key given one more `$` (order kept, own data properties only). */
function escapeKeys(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.keys(o).map((k) => [k.charCodeAt(0) === DOLLAR ? `$${k}` : k, o[k]]));
}

/**
 * JSON text of a value, or a TypeError for what JSON cannot hold. Besides what
 * `JSON.stringify` refuses (BigInt, cycles, a throwing `toJSON`), a function or
 * symbol is refused too instead of silently dropped: the running code holds it
 * and a replay would not, so the two would see different values.
 */
export function toJson(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value, function (this: unknown, key, v: unknown) {
    const raw = (this as Record<string, unknown>)[key];
    if (raw instanceof Uint8Array) return { [BYTES]: toBase64(raw) };
    if (raw instanceof Date) return { [DATE]: raw.toISOString() };
    if (raw instanceof SealedValue) return { [SEALED]: raw.sealed };
    if (typeof v === "function" || typeof v === "symbol") throw new TypeError(`a ${typeof v} cannot be stored as JSON${key ? ` (at key "${key}")` : ""}`);
    if (isPlainRecord(v) && hasDollarKey(v)) return escapeKeys(v);
    return v;
  });
}

/** `toJson` for a value Edda stores in `slot`: what cannot be stored is an UnserializableValueError naming the slot. */
export function toStoredJson(value: unknown, slot: string): string {
  let json: string;
  try {
    json = toJson(value);
  } catch (cause) {
    throw unserializable(slot, cause);
  }
  checkSize(json.length, slot);
  return json;
}

/** `toPayload` for a value Edda stores in `slot` (see `toStoredJson`). */
export function toStoredPayload(value: unknown, slot: string): Payload {
  let p: Payload;
  try {
    p = toPayload(value);
  } catch (cause) {
    throw unserializable(slot, cause);
  }
  checkSize(p.type === "json" ? p.json.length : p.bytes.length, slot);
  return p;
}

function unserializable(slot: string, cause: unknown): UnserializableValueError {
  const why = cause instanceof Error ? cause.message : safeString(cause);
  return new UnserializableValueError(`${slot} cannot be stored as JSON: ${why}`, slot, { cause });
}

/** A tag object's value, or `undefined` when `o` is not a well-formed tag. */
function decodeTag(o: Record<string, unknown>): Uint8Array | Date | SealedValue | undefined {
  const keys = Object.keys(o);
  if (keys.length !== 1) return undefined;
  const v = o[keys[0]!];
  if (typeof v !== "string") return undefined;
  if (keys[0] === BYTES) {
    try {
      return fromBase64(v);
    } catch {
      return undefined;
    }
  }
  if (keys[0] === DATE) {
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? undefined : d;
  }
  if (keys[0] === SEALED) return new SealedValue(v);
  return undefined;
}

/** Strip the escape `$` from user keys (`$$x` → `$x`); legacy single-`$` keys are kept as they are. */
function unescapeKeys(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.keys(o).map((k) => [k.charCodeAt(0) === DOLLAR && k.charCodeAt(1) === DOLLAR ? k.slice(1) : k, o[k]]));
}

/** Decode one parsed value: a tag becomes its value; an object with escaped keys is rebuilt. */
function revive(v: unknown): unknown {
  if (!isPlainRecord(v) || !hasDollarKey(v)) return v;
  return decodeTag(v) ?? unescapeKeys(v);
}

export function fromJson(text: string): unknown {
  const parsed: unknown = JSON.parse(text);
  // Decoding is on the replay path; skip the walk when no key can be tagged or escaped.
  if (!text.includes('"$')) return parsed;
  // An explicit stack, not a reviver: JSON.parse accepts nesting deeper than a recursive walk survives.
  const root = revive(parsed);
  const stack: unknown[] = [root];
  while (stack.length) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i];
        if (typeof child !== "object" || child === null) continue;
        const next = revive(child);
        if (next !== child) node[i] = next;
        stack.push(next);
      }
    } else if (isPlainRecord(node)) {
      for (const k of Object.keys(node)) {
        const child = node[k];
        if (typeof child !== "object" || child === null) continue;
        const next = revive(child);
        if (next !== child) Object.defineProperty(node, k, { value: next, writable: true, enumerable: true, configurable: true });
        stack.push(next);
      }
    }
  }
  return root;
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

/**
 * The only own fields of an error that are stored, and only with a primitive
 * value: an error's enumerable fields are arbitrary (an HTTP client's error
 * carries its request config, Authorization header included), so none but
 * these well-known ones leave the process.
 */
const ERROR_FIELDS = ["code", "errno", "status", "statusCode", "attempts", "retryable", "slot"] as const;
/** Causes kept below the error itself. */
const MAX_CAUSE_DEPTH = 5;

function allowedFields(source: object): Record<string, unknown> | undefined {
  let out: Record<string, unknown> | undefined;
  for (const k of ERROR_FIELDS) {
    if (!Object.hasOwn(source, k)) continue;
    const v = (source as Record<string, unknown>)[k];
    if (typeof v === "number" || typeof v === "boolean") (out ??= {})[k] = v;
    else if (typeof v === "string") (out ??= {})[k] = v.slice(0, 200);
  }
  return out;
}

/** What is stored of an error: name, message, stack, allow-listed fields, and its cause chain. */
export function serializeError(err: unknown, depth = 0): SerializedError {
  if (!(err instanceof Error)) {
    return { name: "Error", message: typeof err === "string" ? err : safeString(err) };
  }
  const out: SerializedError = { name: typeof err.name === "string" && err.name ? err.name : "Error", message: String(err.message) };
  if (typeof err.stack === "string") out.stack = err.stack;
  if (err.cause !== undefined && depth < MAX_CAUSE_DEPTH) out.cause = serializeError(err.cause, depth + 1);
  const fields = allowedFields(err);
  if (fields) out.fields = fields;
  return out;
}

/** The `error_data` of a failed instance: the error's type, message, stack and cause chain. */
export function instanceErrorData(err: unknown): string {
  const s = serializeError(err);
  return toJson({ error_type: s.name, error_message: s.message, ...(s.stack ? { stack: s.stack } : {}), ...(s.cause ? { cause: s.cause } : {}), ...(s.fields ? { fields: s.fields } : {}) });
}

/** How the API shows a stored error: allow-listed keys only, a stack only when asked. */
export interface ErrorViewOptions {
  stacks?: boolean;
}

/** A recorded error (history shape) as the API shows it, whatever was stored (older rows kept every field). */
export function errorView(stored: unknown, opts: ErrorViewOptions = {}, depth = 0): SerializedError {
  const s = isPlainRecord(stored) ? stored : {};
  const out: SerializedError = { name: typeof s.name === "string" ? s.name : "Error", message: typeof s.message === "string" ? s.message : "" };
  if (opts.stacks && typeof s.stack === "string") out.stack = s.stack;
  if (isPlainRecord(s.cause) && depth < MAX_CAUSE_DEPTH) out.cause = errorView(s.cause, opts, depth + 1);
  const fields = isPlainRecord(s.fields) ? allowedFields(s.fields) : undefined;
  if (fields) out.fields = fields;
  return out;
}

/** A failed or cancelled instance's error as the API shows it (what else besides type and message depends on the server's settings). */
export interface StoredError {
  error_type: string;
  error_message: string;
  [key: string]: unknown;
}

/** An instance's `error_data` as the API shows it: `{ error_type, error_message, cause?, fields? }` (+ `stack` when asked). */
export function instanceErrorView(stored: unknown, opts: ErrorViewOptions = {}): StoredError {
  const s = isPlainRecord(stored) ? stored : {};
  const out: StoredError = {
    error_type: typeof s.error_type === "string" ? s.error_type : "Error",
    error_message: typeof s.error_message === "string" ? s.error_message : "",
  };
  if (opts.stacks && typeof s.stack === "string") out.stack = s.stack;
  if (isPlainRecord(s.cause)) out.cause = errorView(s.cause, opts);
  const fields = isPlainRecord(s.fields) ? allowedFields(s.fields) : undefined;
  if (fields) out.fields = fields;
  return out;
}

/** A history event's data as the API shows it: any recorded error (`data.error`) through `errorView`. */
export function historyDataView(data: unknown, opts: ErrorViewOptions = {}): unknown {
  if (!isPlainRecord(data) || !isPlainRecord(data.error)) return data;
  return { ...data, error: errorView(data.error, opts) };
}

export type ErrorClass = new (message: string) => Error;

/** An error class by name: own properties only, so `constructor` or `__proto__` never resolve to Object. */
function errorClassFor(name: string, registry: Record<string, ErrorClass>): ErrorClass {
  if (Object.hasOwn(registry, name)) return registry[name]!;
  if (Object.hasOwn(BUILTIN_ERRORS, name)) return BUILTIN_ERRORS[name]!;
  return Error;
}

export function deserializeError(s: SerializedError, registry: Record<string, ErrorClass> = {}, depth = 0): Error {
  const name = typeof s.name === "string" ? s.name : "Error";
  const message = typeof s.message === "string" ? s.message : safeString(s.message);
  let err: Error;
  try {
    err = new (errorClassFor(name, registry))(message);
    if (!(err instanceof Error)) err = new Error(message);
  } catch {
    err = new Error(message);
  }
  if (isPlainRecord(s.fields)) {
    for (const k of Object.keys(s.fields)) {
      if (k === "name" || k === "message" || k === "stack" || k === "cause") continue;
      Object.defineProperty(err, k, { value: s.fields[k], writable: true, enumerable: true, configurable: true });
    }
  }
  Object.defineProperty(err, "name", { value: name, writable: true, configurable: true, enumerable: false });
  if (typeof s.stack === "string") err.stack = s.stack;
  if (isPlainRecord(s.cause) && depth < MAX_CAUSE_DEPTH) {
    Object.defineProperty(err, "cause", { value: deserializeError(s.cause as unknown as SerializedError, registry, depth + 1), writable: true, configurable: true });
  }
  return err;
}

function safeString(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
