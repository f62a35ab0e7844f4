/**
 * Reading CloudEvents out of an HTTP request, per the CloudEvents HTTP
 * protocol binding 1.0: the Content-Type picks the mode —
 * `application/cloudevents-batch+json` batched, `application/cloudevents+json`
 * structured, any other `application/cloudevents…` format is unsupported
 * (415), anything else binary (`ce-*` headers, the body is the data).
 *
 * The raw input is validated before anything is built from it (no SDK fills
 * gaps): binary-mode header values are unquoted and percent-decoded exactly
 * as the binding says, then judged by the same rules as the JSON format.
 */
import { checkAttributes, fromJsonBatch, fromJsonFormat, type AttributeLimits, type CloudEventRecord } from "../core/cloudevent.ts";
import { isJsonMediaType } from "../core/cloudevent-syntax.ts";
import { InvalidCloudEventError } from "../core/errors.ts";
import { jsonBytes, utf8Text, type BodyRead } from "./body.ts";
import { BadRequestError } from "./problem.ts";

export interface ReceivedEvents {
  events: CloudEventRecord[];
  batch: boolean;
}

function valueOf<T>(read: BodyRead<T>, attribute: string | undefined): T {
  if (!read.ok) throw new InvalidCloudEventError(read.reason, attribute ? { attribute } : {});
  return read.value;
}

const decodeUtf8 = (bytes: Uint8Array, what: string, attribute?: string): string => valueOf(utf8Text(bytes, what), attribute);
const parseJson = (bytes: Uint8Array, what: string, attribute?: string): unknown => valueOf(jsonBytes(bytes, what), attribute);

/**
 * A binary-mode header value to its attribute value (HTTP binding §3.1.3.2):
 * double-quoted strings unescaped first, then one round of percent-decoding;
 * the bytes must be UTF-8 (overlong forms like %C0%A0 are rejected).
 */
export function decodeHeaderValue(raw: string, attribute: string): string {
  const bad = (why: string) => new InvalidCloudEventError(`header ce-${attribute}: ${why}`, { attribute });
  let unquoted = "";
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!;
    if (ch !== '"') {
      unquoted += ch;
      continue;
    }
    for (i++; ; i++) {
      if (i >= raw.length) throw bad("unterminated quoted string");
      const q = raw[i]!;
      if (q === '"') break;
      if (q === "\\") {
        if (++i >= raw.length) throw bad("unterminated quoted string");
        unquoted += raw[i]!;
      } else unquoted += q;
    }
  }
  const bytes: number[] = [];
  for (let i = 0; i < unquoted.length; i++) {
    const c = unquoted.charCodeAt(i);
    if (c === 0x25 /* % */) {
      const hex = unquoted.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw bad("a % not followed by two hex digits");
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else if (c >= 0x20 && c <= 0x7e) bytes.push(c);
    else throw bad("characters outside printable US-ASCII must be percent-encoded");
  }
  return decodeUtf8(new Uint8Array(bytes), `header ce-${attribute}`, attribute);
}

/** Binary mode: attributes from `ce-*` headers, `datacontenttype` from Content-Type, the body as data. */
function fromBinary(headers: Headers, body: Uint8Array, limits: AttributeLimits): CloudEventRecord {
  const attrs: Record<string, unknown> = {};
  let any = false;
  headers.forEach((value, key) => {
    if (!key.startsWith("ce-")) return;
    any = true;
    const name = key.slice(3);
    if (name === "datacontenttype") throw new InvalidCloudEventError("binary mode carries datacontenttype in Content-Type; a ce-datacontenttype header must not be present", { attribute: name });
    attrs[name] = decodeHeaderValue(value, name);
  });
  if (!any) {
    throw new InvalidCloudEventError("not a CloudEvent: binary mode needs ce-* headers (ce-specversion, ce-id, ce-source, ce-type); structured mode needs Content-Type application/cloudevents+json", { attribute: "specversion" });
  }
  const contentType = headers.get("content-type");
  if (contentType !== null) attrs.datacontenttype = contentType;
  const attributes = checkAttributes(attrs, limits);
  if (body.byteLength === 0) return { attributes, data: undefined };
  if (contentType !== null && isJsonMediaType(contentType)) return { attributes, data: parseJson(body, "the event data", "data") };
  if (contentType !== null && /^text\//i.test(contentType)) return { attributes, data: decodeUtf8(body, "the event data", "data") };
  return { attributes, data: body };
}

function mediaType(contentType: string | null): string {
  return (contentType ?? "").split(";")[0]!.trim().toLowerCase();
}

/** The request's events, all valid, or an InvalidCloudEventError (400) / BadRequestError (415). */
export async function readCloudEvents(req: Request, limits: AttributeLimits): Promise<ReceivedEvents> {
  const body = new Uint8Array(await req.arrayBuffer());
  const type = mediaType(req.headers.get("content-type"));
  if (type.startsWith("application/cloudevents-batch")) {
    if (type !== "application/cloudevents-batch+json") throw new BadRequestError(`unsupported CloudEvents batch format "${type}": use application/cloudevents-batch+json`, 415, { retryable: false });
    return { events: fromJsonBatch(parseJson(body, "the request body"), limits), batch: true };
  }
  if (type.startsWith("application/cloudevents")) {
    if (type !== "application/cloudevents+json") throw new BadRequestError(`unsupported CloudEvents format "${type}": use application/cloudevents+json`, 415, { retryable: false });
    const value = parseJson(body, "the request body");
    if (Array.isArray(value)) throw new InvalidCloudEventError("structured mode carries one event; send a JSON array as application/cloudevents-batch+json");
    return { events: [fromJsonFormat(value, limits)], batch: false };
  }
  return { events: [fromBinary(req.headers, body, limits)], batch: false };
}
