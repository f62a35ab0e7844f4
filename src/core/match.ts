/**
 * Event matching: which events a `waitEvent(ctx, type, { match })` accepts.
 *
 * A match is a flat object of equalities. A key is either a CloudEvent
 * attribute (`subject`, `source`, `id`, an extension such as `tenant`) or a
 * path into the event's JSON data (`data.orderId`, `data.customer.id`); a
 * value is a string, a finite number or a boolean. Every entry must hold.
 *
 * The normalized form is one JSON document shaped like the stored event
 * (`{ data: {...}, meta: { ce_subject: ... } }`), so the database decides a
 * match with a single jsonb containment (`@>`) against the message's document
 * — the same test whether it looks back over stored events or wakes waiters
 * after a publish, and one GIN index serves it. Data keys are escaped the way
 * payloads are stored (a user key `$x` is stored `$$x`).
 */

import type { MatchDocument } from "./model.ts";

export type EventMatchValue = string | number | boolean;
export type EventMatch = Readonly<Record<string, EventMatchValue>>;

export type { MatchDocument };

const ATTRIBUTE = /^[a-z0-9]{1,20}$/;
const MAX_ENTRIES = 16;
const MAX_STRING = 1024;

/** `$x` keys are stored with one more `$` (serialization.ts); a match must say it the same way. */
const escapeKey = (k: string) => (k.startsWith("$") ? `$${k}` : k);

/** Validate and normalize a match; a TypeError names the entry at fault. `undefined` → no match. */
export function normalizeMatch(match: EventMatch | undefined): MatchDocument | undefined {
  if (match === undefined) return undefined;
  if (typeof match !== "object" || match === null || Array.isArray(match)) throw new TypeError("match must be an object of key → value");
  const entries = Object.entries(match);
  if (entries.length === 0) throw new TypeError("match must name at least one key");
  if (entries.length > MAX_ENTRIES) throw new TypeError(`match may name at most ${MAX_ENTRIES} keys`);
  const doc: MatchDocument = {};
  for (const [key, value] of entries) {
    const ok = typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value)) || (typeof value === "string" && value.length <= MAX_STRING);
    if (!ok) throw new TypeError(`match["${key}"] must be a string (≤ ${MAX_STRING} characters), a finite number or a boolean`);
    if (key.startsWith("data.")) {
      const path = key.slice(5).split(".");
      if (path.some((p) => p.length === 0)) throw new TypeError(`match key "${key}" has an empty path segment`);
      let node = (doc.data ??= {});
      for (const part of path.slice(0, -1)) {
        const k = escapeKey(part);
        const next = node[k];
        if (next !== undefined && (typeof next !== "object" || next === null)) throw new TypeError(`match key "${key}" conflicts with another key`);
        node = (node[k] ??= {}) as Record<string, unknown>;
      }
      const leaf = escapeKey(path[path.length - 1]!);
      if (node[leaf] !== undefined) throw new TypeError(`match key "${key}" conflicts with another key`);
      node[leaf] = value;
    } else if (ATTRIBUTE.test(key) && key !== "data" && key !== "specversion") {
      (doc.meta ??= {})[`ce_${key}`] = value;
    } else {
      throw new TypeError(`match key "${key}" is neither a CloudEvent attribute (lower-case letters and digits, at most 20) nor a data path ("data.orderId")`);
    }
  }
  return doc;
}
