/**
 * The string syntaxes the CloudEvents 1.0 type system refers to, checked
 * exactly as their RFCs write them: String (the characters the core spec
 * disallows), Timestamp (RFC 3339 `date-time`), URI and URI-reference
 * (RFC 3986 §4.3 / §4.1), media types (RFC 2046 / RFC 2045 §5.1) and Binary
 * (RFC 4648 base64). Pure functions, no I/O.
 */

/** Control characters, unpaired surrogates and Unicode noncharacters: not allowed in a CloudEvents String. */
const DISALLOWED = /[\p{Cc}\p{Cs}\p{Noncharacter_Code_Point}]/u;

export function isCloudEventString(s: string): boolean {
  return !DISALLOWED.test(s);
}

/** Length in code points, as Postgres counts `varchar(n)`. */
export function codePointLength(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

// --- RFC 3339 ------------------------------------------------------------------

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * RFC 3339 §5.6 `date-time`, with the §5.7 restrictions: real calendar days,
 * hours 00-23, minutes 00-59, offsets within ±23:59, and a leap second (60)
 * only where it can occur — the last minute of a UTC day.
 */
export function isRfc3339(s: string): boolean {
  const m = DATE_TIME.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return false;
  if (hour > 23 || minute > 59 || second > 60) return false;
  let offsetMinutes = 0;
  if (m[7]) {
    const oh = Number(m[8]);
    const om = Number(m[9]);
    if (oh > 23 || om > 59) return false;
    offsetMinutes = (m[7] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  if (second === 60) {
    const utcMinuteOfDay = (((hour * 60 + minute - offsetMinutes) % 1440) + 1440) % 1440;
    if (utcMinuteOfDay !== 1439) return false;
  }
  return true;
}

// --- RFC 2046 media types -----------------------------------------------------------

// RFC 2045 §5.1: token := 1*<any (US-ASCII) CHAR except SPACE, CTLs, or tspecials>.
const TOKEN = "[!#$%&'*+\\-.0-9A-Z^_`a-z{|}~]+";
const QUOTED = '"(?:[\\t\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\t\\x20-\\x7e])*"';
const MEDIA_TYPE = new RegExp(`^(${TOKEN})/(${TOKEN})(?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|${QUOTED}))*$`);

/** `type "/" subtype *(";" parameter)` (RFC 2045 §5.1, referenced by RFC 2046), optional whitespace around `;`. */
export function isMediaType(s: string): boolean {
  return MEDIA_TYPE.test(s);
}

/** JSON-formatted content per the JSON event format §3.1.1: `*\/json` or `*\/*+json`, parameters stripped. */
export function isJsonMediaType(s: string): boolean {
  const m = MEDIA_TYPE.exec(s);
  if (!m) return false;
  const subtype = m[2]!.toLowerCase();
  return subtype === "json" || subtype.endsWith("+json");
}

// --- RFC 3986 ------------------------------------------------------------------

const PCT = "%[0-9A-Fa-f]{2}";
const UNRESERVED = "A-Za-z0-9\\-._~";
const SUB_DELIMS = "!$&'()*+,;=";
const PCHAR = `(?:[${UNRESERVED}${SUB_DELIMS}:@]|${PCT})`;
const PATH = new RegExp(`^(?:${PCHAR}|/)*$`);
const QUERY = new RegExp(`^(?:${PCHAR}|[/?])*$`);
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*$/;
const USERINFO = new RegExp(`^(?:[${UNRESERVED}${SUB_DELIMS}:]|${PCT})*$`);
const REG_NAME = new RegExp(`^(?:[${UNRESERVED}${SUB_DELIMS}]|${PCT})*$`);
const IP_LITERAL = new RegExp(`^\\[(?:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*|[vV][0-9A-Fa-f]+\\.[${UNRESERVED}${SUB_DELIMS}:]+)\\]$`);
// RFC 3986 Appendix B: splits any string into the five components.
const SPLIT = /^(?:([^:/?#]+):)?(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/s;

function isAuthority(a: string): boolean {
  const at = a.lastIndexOf("@");
  if (at >= 0 && !USERINFO.test(a.slice(0, at))) return false;
  let host = a.slice(at + 1);
  const port = /:(\d*)$/.exec(host);
  if (port && !host.startsWith("[")) host = host.slice(0, port.index);
  else if (host.startsWith("[")) {
    const close = host.indexOf("]");
    if (close < 0 || !/^(?::\d*)?$/.test(host.slice(close + 1))) return false;
    host = host.slice(0, close + 1);
  }
  return host.startsWith("[") ? IP_LITERAL.test(host) : REG_NAME.test(host);
}

function uriParts(s: string) {
  const m = SPLIT.exec(s);
  if (!m) return null;
  const [, scheme, authority, path, query, fragment] = m;
  // A string whose first segment holds a colon splits as a scheme; RFC 3986 §4.2 forbids that colon in a relative reference.
  if (scheme !== undefined && !SCHEME.test(scheme)) return null;
  if (authority !== undefined && !isAuthority(authority)) return null;
  if (!PATH.test(path ?? "")) return null;
  if (query !== undefined && !QUERY.test(query)) return null;
  if (fragment !== undefined && !QUERY.test(fragment)) return null;
  return { scheme, fragment };
}

/** RFC 3986 §4.1 `URI-reference` (a URI or a relative reference). */
export function isUriReference(s: string): boolean {
  return uriParts(s) !== null;
}

/** RFC 3986 §4.3 `absolute-URI`: a scheme, no fragment. */
export function isAbsoluteUri(s: string): boolean {
  const p = uriParts(s);
  return p !== null && p.scheme !== undefined && p.fragment === undefined;
}

// --- RFC 4648 ------------------------------------------------------------------

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Standard-alphabet, padded base64 (RFC 4648 §4) decoded; null when `s` is not exactly that. */
export function decodeBase64(s: string): Uint8Array | null {
  if (!BASE64.test(s)) return null;
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function encodeBase64(bytes: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}
