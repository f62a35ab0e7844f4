/**
 * Reading request bodies, one rule for every route that reads one: the JSON
 * API (through `documented`), the per-wait hooks, the signed webhooks and
 * CloudEvents. Bytes are strict UTF-8 (a bad byte is refused, never replaced
 * by U+FFFD, so what is stored is what was sent); JSON is parsed only within
 * the nesting limit. The size limit is the app's (`bodyLimit` in app.ts),
 * enforced before any of this runs.
 *
 * `utf8Text` and `jsonText` return the value or the reason it is refused
 * ("the body is not valid JSON"): each route turns the reason into its own
 * answer (a problem type, a MalformedWebhookError, an InvalidCloudEventError).
 */
import type { Context } from "hono";
import { BadRequestError } from "./problem.ts";

/**
 * Deepest array/object nesting accepted in a JSON body. Payloads are
 * serialized and revived recursively (JSON.stringify with a replacer,
 * JSON.parse with a reviver), which overflows the stack a few thousand levels
 * down; real payloads stay far below this.
 */
export const MAX_JSON_DEPTH = 512;

/** Whether `text` nests arrays/objects deeper than MAX_JSON_DEPTH (string contents are skipped). */
export function jsonTooDeep(text: string): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92 /* \ */) i++;
      else if (ch === 34 /* " */) inString = false;
    } else if (ch === 34) inString = true;
    else if (ch === 91 /* [ */ || ch === 123 /* { */) {
      if (++depth > MAX_JSON_DEPTH) return true;
    } else if (ch === 93 /* ] */ || ch === 125 /* } */) depth--;
  }
  return false;
}

/** `application/json`, or any `+json` type (`application/merge-patch+json`…). */
export const isJsonContentType = (contentType: string): boolean => /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(contentType.trim());

/** A body's value, or why it is refused (a sentence about `what`, e.g. "the body is not valid JSON"). */
export type BodyRead<T> = { ok: true; value: T } | { ok: false; reason: string };

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The bytes as text, refused unless they are valid UTF-8. */
export function utf8Text(bytes: Uint8Array, what = "the body"): BodyRead<string> {
  try {
    return { ok: true, value: utf8.decode(bytes) };
  } catch {
    return { ok: false, reason: `${what} is not valid UTF-8` };
  }
}

/** The text as JSON, refused when it nests deeper than MAX_JSON_DEPTH or does not parse. */
export function jsonText(text: string, what = "the body"): BodyRead<unknown> {
  if (jsonTooDeep(text)) return { ok: false, reason: `${what} nests deeper than ${MAX_JSON_DEPTH} levels` };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, reason: `${what} is not valid JSON` };
  }
}

/** The bytes as JSON: UTF-8 first, then `jsonText`. */
export function jsonBytes(bytes: Uint8Array, what = "the body"): BodyRead<unknown> {
  const text = utf8Text(bytes, what);
  return text.ok ? jsonText(text.value, what) : text;
}

/** Parse a JSON request body; malformed → 400 (the public API has refused non-JSON types first: guards.ts jsonWritesOnly). */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") return {};
  const parsed = jsonText(text, "request body");
  if (!parsed.ok) throw new BadRequestError(parsed.reason);
  return parsed.value;
}
