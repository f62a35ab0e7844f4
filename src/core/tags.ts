/**
 * Tags (search attributes): short string pairs an instance is found by
 * (`GET /instances?tag=orderId:o-1`). Set at start by the workflow's `tags`
 * option, or later from workflow code with `setTags` (engine/tags.ts), and
 * stored indexed beside the instance. Bounded, because every one is an index
 * entry: at most MAX_TAGS per instance, a key of at most MAX_TAG_KEY
 * characters of `A-Z a-z 0-9 _ . -`, a value of at most MAX_TAG_VALUE
 * characters with no NUL. Anything else is a ValidationError naming each
 * offending tag, and nothing is stored.
 */
import { InvalidArgumentError, ValidationError } from "./errors.ts";
import { MAX_TAGS, type Tags } from "./model.ts";

export { MAX_TAGS, type Tags };
export const MAX_TAG_KEY = 64;
export const MAX_TAG_VALUE = 256;
const KEY = /^[A-Za-z0-9_.-]+$/;

/** `tags` as stored, or a ValidationError (issues under `path`). */
export function checkTags(tags: unknown, what: string, path: string[] = ["tags"]): Tags {
  if (typeof tags !== "object" || tags === null || Array.isArray(tags)) throw new ValidationError(`${what} must be an object of string values`, [{ path, message: "expected an object" }]);
  const issues: { path: string[]; message: string }[] = [];
  const entries = Object.entries(tags);
  if (entries.length > MAX_TAGS) issues.push({ path, message: `at most ${MAX_TAGS} tags, got ${entries.length}` });
  for (const [key, value] of entries) {
    if (key.length === 0 || key.length > MAX_TAG_KEY || !KEY.test(key)) issues.push({ path: [...path, key.slice(0, 80)], message: `a key is 1–${MAX_TAG_KEY} characters of A-Z a-z 0-9 _ . -` });
    if (typeof value !== "string") issues.push({ path: [...path, key.slice(0, 80)], message: "a value is a string" });
    else if (value.length > MAX_TAG_VALUE) issues.push({ path: [...path, key.slice(0, 80)], message: `a value is at most ${MAX_TAG_VALUE} characters, got ${value.length}` });
    else if (value.includes("\u0000")) issues.push({ path: [...path, key.slice(0, 80)], message: "a value must not contain U+0000" });
  }
  if (issues.length) throw new ValidationError(`${what} are invalid: ${issues.map((i) => `${i.path.join(".")}: ${i.message}`).slice(0, 3).join("; ")}`, issues);
  return Object.fromEntries(entries) as Tags;
}

/** `key:value` filters (the first `:` splits each), at most MAX_TAGS; anything else is an InvalidArgumentError (a 400). */
export function parseTagFilters(texts: readonly string[]): [string, string][] {
  if (texts.length > MAX_TAGS) throw new InvalidArgumentError(`at most ${MAX_TAGS} tag filters`, [{ path: ["tag"], message: `at most ${MAX_TAGS}` }]);
  return texts.map((text) => {
    const at = text.indexOf(":");
    if (at < 0) throw new InvalidArgumentError(`tag filter "${text.slice(0, 80)}" is not key:value`, [{ path: ["tag"], message: "expected key:value" }]);
    const [key, value] = [text.slice(0, at), text.slice(at + 1)];
    try {
      checkTags({ [key]: value }, "tag filters", ["tag"]);
    } catch (err) {
      if (err instanceof ValidationError) throw new InvalidArgumentError(err.message, err.issues);
      throw err;
    }
    return [key, value];
  });
}
