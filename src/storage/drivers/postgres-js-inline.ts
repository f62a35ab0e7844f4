/**
 * Statements that carry their values as literals, for postgres.js without
 * named prepared statements.
 *
 * postgres.js sends a statement with parameters that is not prepared on the
 * connection in two flights: Parse/Describe first, to learn the parameter
 * types it serializes by, then Bind/Execute. With `prepare: false` that is
 * every statement, and on a client opened per request (a Worker) it is every
 * statement even when prepared: two round trips each. A statement without
 * parameters goes in one flight, so where it is exact the values are written
 * into the text as literals, each meaning to Postgres what the parameter
 * meant: an untyped literal where postgres.js leaves the parameter's type to
 * the server (strings, numbers), a typed one where it declares it (booleans
 * `bool`, bigints `int8`, bytes `bytea`). Every string is an `E'…'` literal
 * with `\` and `'` doubled, which means the same whatever
 * `standard_conforming_strings` says, and the statement still goes through
 * the extended protocol, which refuses more than one command.
 *
 * Anything else — a value postgres.js treats specially (a Date, an array, an
 * object, postgres.js's typed parameters), a string with a NUL byte (the
 * server's own error is the right one), undefined, a placeholder the text
 * does not match — leaves the statement as it was: parameters, two flights.
 */

/** Where the `$n` placeholders are in a statement's text (quotes, identifiers and comments skipped). */
interface Placeholders {
  /** Text between placeholders: parts.length === indexes.length + 1. */
  parts: string[];
  /** 0-based parameter index of each placeholder. */
  indexes: number[];
}

const isIdentChar = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_$\u0080-\uffff]/.test(c);

/** Splits `text` at its placeholders; null where the text cannot be read with certainty (an unterminated quote). */
export function findPlaceholders(text: string): Placeholders | null {
  const parts: string[] = [];
  const indexes: number[] = [];
  let from = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === "'") {
      // E'…' (backslash escapes) when an E that is not the end of a longer word precedes the quote.
      const escapes = (text[i - 1] === "E" || text[i - 1] === "e") && !isIdentChar(text[i - 2]);
      i++;
      for (;;) {
        if (i >= n) return null;
        if (escapes && text[i] === "\\") i += 2;
        else if (text[i] === "'") {
          if (text[i + 1] === "'") i += 2;
          else break;
        } else i++;
      }
      i++;
    } else if (c === '"') {
      i++;
      for (;;) {
        if (i >= n) return null;
        if (text[i] === '"') {
          if (text[i + 1] === '"') i += 2;
          else break;
        } else i++;
      }
      i++;
    } else if (c === "-" && text[i + 1] === "-") {
      const end = text.indexOf("\n", i);
      i = end < 0 ? n : end + 1;
    } else if (c === "/" && text[i + 1] === "*") {
      let depth = 1;
      i += 2;
      while (depth > 0) {
        if (i >= n) return null;
        if (text[i] === "/" && text[i + 1] === "*") {
          depth++;
          i += 2;
        } else if (text[i] === "*" && text[i + 1] === "/") {
          depth--;
          i += 2;
        } else i++;
      }
    } else if (c === "$" && !isIdentChar(text[i - 1])) {
      const digits = /^\$(\d+)/.exec(text.slice(i, i + 12));
      if (digits) {
        parts.push(text.slice(from, i));
        indexes.push(Number(digits[1]) - 1);
        i += digits[0].length;
        from = i;
        continue;
      }
      const tag = /^\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(text.slice(i, i + 64));
      if (tag) {
        const end = text.indexOf(tag[0], i + tag[0].length);
        if (end < 0) return null;
        i = end + tag[0].length;
      } else i++;
    } else i++;
  }
  parts.push(text.slice(from));
  return { parts, indexes };
}

const escapeString = (s: string) => "E'" + s.replace(/\\/g, "\\\\").replace(/'/g, "''") + "'";

function hex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

/** The literal meaning what postgres.js would send for `value`, or null where there is none. */
export function literalFor(value: unknown): string | null {
  if (value === null) return "NULL";
  switch (typeof value) {
    case "string":
      return value.includes("\0") ? null : escapeString(value);
    case "number":
      // postgres.js sends `'' + value` with the type left to the server.
      return `'${String(value)}'`;
    case "boolean":
      return value ? "'t'::bool" : "'f'::bool";
    case "bigint":
      return `'${value.toString()}'::int8`;
    case "object":
      return value instanceof Uint8Array ? `E'\\\\x${hex(value)}'::bytea` : null;
    default:
      return null;
  }
}

const CACHE_MAX = 512;
const cache = new Map<string, Placeholders | null>();

function placeholdersOf(text: string): Placeholders | null {
  let found = cache.get(text);
  if (found === undefined && !cache.has(text)) {
    found = findPlaceholders(text);
    // Statements come from a fixed set of shapes; a bound keeps one-off raw SQL from growing the map.
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
    cache.set(text, found);
  }
  return found ?? null;
}

/** `text` with `params` written in as literals, or null to send it with its parameters as it is. */
export function inlineParameters(text: string, params: readonly unknown[]): string | null {
  const ph = placeholdersOf(text);
  if (!ph) return null;
  // Postgres refuses a parameter the text never uses; so does this (by sending it unchanged).
  const used = new Set(ph.indexes);
  if (used.size !== params.length) return null;
  const literals: string[] = [];
  for (let i = 0; i < params.length; i++) {
    if (!used.has(i)) return null;
    const lit = literalFor(params[i]);
    if (lit === null) return null;
    literals.push(lit);
  }
  let out = ph.parts[0]!;
  for (let k = 0; k < ph.indexes.length; k++) {
    const lit = literals[ph.indexes[k]!];
    if (lit === undefined) return null;
    out += lit + ph.parts[k + 1]!;
  }
  return out;
}
