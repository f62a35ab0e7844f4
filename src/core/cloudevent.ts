/**
 * CloudEvents 1.0: one set of rules for every event Edda receives or sends.
 *
 * - Context attributes (core spec "Context Attributes", "Type System"): the
 *   four REQUIRED ones present, non-empty and typed (`specversion` exactly
 *   "1.0"); OPTIONAL ones, when present, non-empty and well-formed; names
 *   lower-case alphanumeric, at most 20 characters (the spec's SHOULD, kept
 *   as a rule so that whatever Edda accepts it could also send); values
 *   String, Integer (32-bit) or Boolean, Strings free of the characters the
 *   type system disallows.
 * - JSON event format: `null` means unset, `data` and `data_base64` never
 *   both, `data_base64` strict base64, non-JSON `data` a string.
 * - Nothing is invented: an attribute the sender left out stays absent.
 *
 * Values are checked as received; the limits are the storage columns'.
 * Every failure is an InvalidCloudEventError naming the attribute.
 */
import { InvalidCloudEventError } from "./errors.ts";
import { codePointLength, decodeBase64, encodeBase64, isAbsoluteUri, isCloudEventString, isJsonMediaType, isMediaType, isRfc3339, isUriReference } from "./cloudevent-syntax.ts";

export const SPEC_VERSION = "1.0";
/** Events per `application/cloudevents-batch+json` request: each one is a few statements in the batch's single transaction. */
export const MAX_BATCH_EVENTS = 100;

export type AttributeValue = string | number | boolean;
export type Attributes = { id: string; source: string; specversion: string; type: string } & Record<string, AttributeValue>;

export interface CloudEventRecord {
  attributes: Attributes;
  /** `undefined` when the event has no data; a Uint8Array for binary data. */
  data: unknown;
}

/** Longest value (code points) per attribute; the rest are bounded by the request size. */
export type AttributeLimits = Partial<Record<string, number>>;
/** What the ingestion tables hold (`cloudevent_dedupe`, `channel_messages`). */
export const INGESTION_LIMITS: AttributeLimits = { id: 255, source: 1024, type: 255, eddainstanceid: 255 };
/** What `outbox_events` holds. */
export const OUTBOX_LIMITS: AttributeLimits = { id: 255, source: 255, type: 255, datacontenttype: 100 };

const REQUIRED = ["specversion", "id", "source", "type"] as const;
const NAME = /^[a-z0-9]+$/;
const MAX_NAME = 20;
const INT32 = 2 ** 31;

type Kind = "string" | "uri-reference" | "uri" | "timestamp" | "media-type";
const CORE: Record<string, Kind> = {
  id: "string",
  source: "uri-reference",
  specversion: "string",
  type: "string",
  datacontenttype: "media-type",
  dataschema: "uri",
  subject: "string",
  time: "timestamp",
  // Edda's own extension: the instance a point-to-point event is for.
  eddainstanceid: "string",
};
const DESCRIBE: Record<Kind, string> = {
  string: "a non-empty String",
  "uri-reference": "a non-empty URI-reference (RFC 3986)",
  uri: "an absolute URI (RFC 3986)",
  timestamp: "an RFC 3339 timestamp",
  "media-type": "a media type (RFC 2046)",
};

const fail = (attribute: string, message: string) => new InvalidCloudEventError(message, { attribute });

function wellFormed(kind: Kind, v: string): boolean {
  switch (kind) {
    case "string":
      return true;
    case "uri-reference":
      return isUriReference(v);
    case "uri":
      return isAbsoluteUri(v);
    case "timestamp":
      return isRfc3339(v);
    case "media-type":
      return isMediaType(v);
  }
}

export function checkAttributeName(name: string): void {
  const shown = JSON.stringify(name.slice(0, 40));
  if (name === "data") throw fail(name, `"data" is reserved and cannot be an attribute name`);
  if (!NAME.test(name)) throw fail(name.slice(0, 40), `attribute name ${shown} must consist of lower-case letters and digits`);
  if (name.length > MAX_NAME) throw fail(name.slice(0, 40), `attribute name ${shown} is longer than ${MAX_NAME} characters`);
}

function checkValue(name: string, value: unknown, limits: AttributeLimits): void {
  const kind = CORE[name];
  if (typeof value === "string") {
    if (kind && value === "") throw fail(name, `attribute "${name}" must be ${DESCRIBE[kind]}, got an empty string`);
    if (!isCloudEventString(value)) throw fail(name, `attribute "${name}" contains characters a CloudEvents String disallows (control characters, unpaired surrogates, noncharacters)`);
    if (kind && !wellFormed(kind, value)) throw fail(name, `attribute "${name}" must be ${DESCRIBE[kind]}`);
    if (name === "specversion" && value !== SPEC_VERSION) throw fail(name, `unsupported specversion: only "${SPEC_VERSION}" is accepted`);
    const max = limits[name];
    if (max !== undefined && value.length > max && codePointLength(value) > max) throw fail(name, `attribute "${name}" is longer than ${max} characters`);
    return;
  }
  if (kind) throw fail(name, `attribute "${name}" must be ${DESCRIBE[kind]} (a JSON string)`);
  if (typeof value === "boolean") return;
  if (typeof value === "number" && Number.isInteger(value) && value >= -INT32 && value < INT32) return;
  throw fail(name, `extension attribute "${name}" must be a String, an Integer (32-bit) or a Boolean`);
}

/**
 * Check a set of context attributes (core and extensions); `null`/`undefined`
 * values must already be dropped. Returns them typed.
 */
export function checkAttributes(attrs: Record<string, unknown>, limits: AttributeLimits = {}): Attributes {
  for (const name of REQUIRED) if (attrs[name] === undefined) throw fail(name, `required attribute "${name}" is missing`);
  // specversion first: an event of another version is judged by that version's rules, not these.
  checkValue("specversion", attrs.specversion, limits);
  for (const [name, value] of Object.entries(attrs)) {
    checkAttributeName(name);
    checkValue(name, value, limits);
  }
  return attrs as Attributes;
}

// --- JSON event format --------------------------------------------------------------

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** One event in the JSON format (structured mode, or a batch member). */
export function fromJsonFormat(value: unknown, limits: AttributeLimits = {}): CloudEventRecord {
  if (!isObject(value)) throw new InvalidCloudEventError("a CloudEvent in the JSON format is a JSON object");
  const attrs: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(value)) {
    if (name === "data" || name === "data_base64" || v === null) continue;
    attrs[name] = v;
  }
  const attributes = checkAttributes(attrs, limits);
  const base64 = value.data_base64 ?? undefined;
  if (base64 !== undefined) {
    if ("data" in value) throw fail("data_base64", `"data" and "data_base64" are mutually exclusive`);
    const bytes = typeof base64 === "string" ? decodeBase64(base64) : null;
    if (!bytes) throw fail("data_base64", `"data_base64" must be a base64 string (RFC 4648, standard alphabet, padded)`);
    return { attributes, data: bytes };
  }
  if (!("data" in value)) return { attributes, data: undefined };
  const ct = attributes.datacontenttype;
  if (typeof ct === "string" && !isJsonMediaType(ct) && typeof value.data !== "string") {
    throw fail("data", `with the non-JSON datacontenttype "${ct.slice(0, 100)}", "data" must be a string`);
  }
  return { attributes, data: value.data };
}

/** A JSON batch: every member valid, or an error naming the first bad member's index. */
export function fromJsonBatch(value: unknown, limits: AttributeLimits = {}, maxEvents = MAX_BATCH_EVENTS): CloudEventRecord[] {
  if (!Array.isArray(value)) throw new InvalidCloudEventError("a CloudEvents batch is a JSON array");
  if (value.length > maxEvents) throw new InvalidCloudEventError(`a batch holds at most ${maxEvents} events, got ${value.length}`);
  return value.map((member, index) => {
    try {
      return fromJsonFormat(member, limits);
    } catch (err) {
      if (!(err instanceof InvalidCloudEventError)) throw err;
      throw new InvalidCloudEventError(`batch member ${index}: ${err.message}`, { ...(err.attribute !== undefined ? { attribute: err.attribute } : {}), index });
    }
  });
}

/** The event in the JSON format (structured mode); binary data as `data_base64`. */
export function toJsonFormat(event: CloudEventRecord): string {
  const out: Record<string, unknown> = { ...event.attributes };
  if (event.data instanceof Uint8Array) out.data_base64 = encodeBase64(event.data);
  else if (event.data !== undefined) out.data = event.data;
  return JSON.stringify(out);
}

/** An event built in code (sendEvent, the outbox): attributes checked, data consistent with its content type. */
export function outgoingEvent(attrs: Record<string, unknown>, data: unknown, limits: AttributeLimits = OUTBOX_LIMITS): CloudEventRecord {
  const defined = Object.fromEntries(Object.entries(attrs).filter(([, v]) => v !== undefined && v !== null));
  const attributes = checkAttributes(defined, limits);
  const ct = attributes.datacontenttype;
  if (!(data instanceof Uint8Array) && data !== undefined && typeof ct === "string" && !isJsonMediaType(ct) && typeof data !== "string") {
    throw fail("data", `with the non-JSON datacontenttype "${ct.slice(0, 100)}", data must be a string or bytes`);
  }
  return { attributes, data };
}
