/**
 * Operation ids. Every Edda operation in a workflow has a deterministic id:
 * `{prefix}:{n}` where `n` counts calls with that prefix in call order
 * (`charge:1`, `sleep:2`, `receive_orders:1`). The engine derives more ids from
 * them with reserved characters: `{id}#{attempt}` for failed attempts and
 * `{id}#retry{attempt}` for retry timers. Only a counted id ends in
 * `:{digits}` (ids built on another, `{id}:result`, `{id}:wait`, end in a word;
 * explicit ids have no `:`), so counted ids never collide with any other
 * (replay.ts `claim` relies on it).
 *
 * User text that becomes part of an id (channel and group names, event types,
 * explicit ids) is escaped so it can never produce a reserved character: `%`,
 * `#`, `:`, `~` and control characters are percent-encoded (`orders#eu` →
 * `orders%23eu`). Encoding is injective, so two different channels never share
 * an id, and ids of names without those characters are unchanged (histories
 * recorded before the encoding replay as they were). Very long text is cut and
 * suffixed with a hash so an id always fits the 255-character column.
 */

const RESERVED = /[%#:~\p{Cc}]/gu;
/** Longest encoded user part kept verbatim; longer ones are cut and hashed. */
const MAX_PART = 120;

/** Escape user text for use inside an operation id. */
export function encodeIdPart(text: string): string {
  const encoded = text.replace(RESERVED, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`);
  if (encoded.length <= MAX_PART) return encoded;
  // `~` is escaped in every encoded part, so a cut-and-hashed part never equals a whole one.
  return `${encoded.slice(0, MAX_PART - 18)}~${fnv1a64(text)}`;
}

/** An explicit id given by the user (`withId`, `{ id }`): escaped like any user text. */
export function explicitId(id: string): string {
  if (typeof id !== "string" || id.length === 0) throw new TypeError("an explicit operation id must be a non-empty string");
  return encodeIdPart(id);
}

/** `{id}#{attempt}`: the row recording a failed attempt of the operation at `id`. */
export const attemptId = (id: string, attempt: number): string => `${id}#${attempt}`;
/** `{id}#retry{attempt}`: the timer that schedules the next attempt. */
export const retryTimerId = (id: string, attempt: number): string => `${id}#retry${attempt}`;
/** Ids with `#` belong to the operation before the `#` (user text never contains a raw `#`). */
export const isDerivedId = (id: string): boolean => id.includes("#");

/** FNV-1a, 64 bits, as 16 hex digits: a short, stable, dependency-free digest. */
export function fnv1a64(text: string): string {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(text)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, "0");
}
