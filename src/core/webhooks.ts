/**
 * Declared webhook sources: `webhook("stripe", { verify: stripeVerifier() })`
 * registered with the app (`createEdda({ webhooks: [...] })`) serves
 * `POST /webhooks/stripe`. A delivery is verified over its raw body with the
 * secrets of `EDDA_WEBHOOK_STRIPE_SECRET` (comma-separated: every listed
 * secret is accepted, for rotation), then `toEvent` turns it into an event
 * that enters the same ingestion as a CloudEvent (handlers start, matching
 * `waitEvent`s wake, `(source, id)` applied once).
 *
 * Each verifier brings a default `toEvent` for its sender (Stripe: the event's
 * `type` and `id`, `data` its `data`; GitHub: `X-GitHub-Event` + `.action`,
 * the delivery id; Standard Webhooks: the payload's `type` and `data`, the
 * `webhook-id`); the default `source` is `/webhooks/<name>`.
 */
import {
  checkGitHub,
  checkHmac,
  checkHmacScheme,
  checkStandardWebhooks,
  checkStripe,
  standardWebhooksHeader,
  type HmacScheme,
  type RawDelivery,
  type SignatureCheck,
} from "./webhook-signatures.ts";

export type { HmacAlgorithm, HmacScheme, SignatureEncoding } from "./webhook-signatures.ts";

/** What `toEvent` makes of a delivery: the event ingestion stores (a CloudEvent's attributes and data). */
export interface WebhookEvent {
  type: string;
  /** A URI-reference; the dedupe key is `(source, id)`. Default `/webhooks/<name>`. */
  source: string;
  id: string;
  /** JSON data (what `waitEvent` matches `data.*` against). */
  data: unknown;
  subject?: string;
  /** RFC 3339. */
  time?: string;
}

/** A verified delivery, as `toEvent` sees it. */
export interface WebhookRequest {
  /** The webhook's name (the `:name` of `/webhooks/:name`). */
  readonly name: string;
  readonly headers: Headers;
  /** The raw body. */
  readonly body: Uint8Array;
  /** The body as UTF-8 text. */
  text(): string;
  /** The body parsed as JSON (throws on malformed JSON: a 400). */
  json(): unknown;
}

export interface WebhookVerifier {
  /** The scheme's name (`stripe`, `github`, `standard-webhooks`, `hmac`). */
  readonly scheme: string;
  /** Accepts the delivery when it is signed by one of `secrets`; `variable` names where they came from (for configuration errors). */
  verify(delivery: RawDelivery, secrets: readonly string[], nowSeconds: number, variable?: string): Promise<SignatureCheck>;
  /** The sender's default event. */
  toEvent(request: WebhookRequest): WebhookEvent | Promise<WebhookEvent>;
}

export interface WebhookOptions {
  verify: WebhookVerifier;
  /** Default: the verifier's own. */
  toEvent?: (request: WebhookRequest) => WebhookEvent | Promise<WebhookEvent>;
}

export interface Webhook {
  readonly name: string;
  readonly verify: WebhookVerifier;
  readonly toEvent: (request: WebhookRequest) => WebhookEvent | Promise<WebhookEvent>;
}

/** Lower-case letters, digits and `_`, so the name maps one-to-one to its variable `EDDA_WEBHOOK_<NAME>_SECRET`. */
const NAME = /^[a-z][a-z0-9_]{0,62}$/;

export function webhook(name: string, opts: WebhookOptions): Webhook {
  if (typeof name !== "string" || !NAME.test(name)) throw new TypeError(`webhook name "${String(name)}" must be lower-case letters, digits and _ (it names EDDA_WEBHOOK_<NAME>_SECRET and the path /webhooks/<name>)`);
  if (!opts || typeof opts.verify?.verify !== "function") throw new TypeError(`webhook "${name}": verify must be a verifier (stripeVerifier(), githubVerifier(), standardWebhooksVerifier(), hmacVerifier({...}))`);
  return { name, verify: opts.verify, toEvent: opts.toEvent ?? ((r) => opts.verify.toEvent(r)) };
}

/** The configuration variable holding a webhook's secrets. */
export const webhookSecretVariable = (name: string) => `EDDA_WEBHOOK_${name.toUpperCase()}_SECRET`;

/** A value the default `toEvent` needed and the delivery did not have: a 400 to the sender. */
export class MalformedWebhookError extends Error {
  override name = "MalformedWebhookError";
}

const defaultSource = (r: WebhookRequest) => `/webhooks/${r.name}`;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function jsonObject(r: WebhookRequest): Record<string, unknown> {
  const body = r.json();
  if (!isObject(body)) throw new MalformedWebhookError("the body must be a JSON object");
  return body;
}

function stringField(o: Record<string, unknown>, key: string, what: string): string {
  const v = o[key];
  if (typeof v !== "string" || v === "") throw new MalformedWebhookError(`${what} has no "${key}"`);
  return v;
}

function requiredHeader(r: WebhookRequest, name: string): string {
  const v = r.headers.get(name);
  if (!v) throw new MalformedWebhookError(`the ${name} header is missing`);
  return v;
}

const unixTime = (v: unknown) => (typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? new Date(v * 1000).toISOString() : undefined);

export interface ToleranceOptions {
  /** How far (seconds) the signed timestamp may be from now; default 300, the senders' own default. */
  toleranceSeconds?: number;
}

/** Stripe (`Stripe-Signature`): the event's `type` and `id`; `data` is the event's `data` (so `data.object.…` matches). */
export function stripeVerifier(opts: ToleranceOptions = {}): WebhookVerifier {
  const tolerance = opts.toleranceSeconds ?? 300;
  return {
    scheme: "stripe",
    verify: (d, secrets, now) => checkStripe(d, secrets, tolerance, now),
    toEvent(r) {
      const e = jsonObject(r);
      const data = e.data;
      const object = isObject(data) && isObject(data.object) ? data.object : undefined;
      const time = unixTime(e.created);
      return {
        type: stringField(e, "type", "the Stripe event"),
        id: stringField(e, "id", "the Stripe event"),
        source: defaultSource(r),
        data: data ?? null,
        ...(typeof object?.id === "string" && object.id !== "" ? { subject: object.id } : {}),
        ...(time ? { time } : {}),
      };
    },
  };
}

/** GitHub's form-encoded deliveries carry the JSON in a `payload` field. */
function githubPayload(r: WebhookRequest): unknown {
  const type = (r.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") return r.json();
  const payload = new URLSearchParams(r.text()).get("payload");
  if (payload === null) throw new MalformedWebhookError("a form-encoded GitHub delivery has no payload field");
  try {
    return JSON.parse(payload);
  } catch {
    throw new MalformedWebhookError("the payload field is not valid JSON");
  }
}

/** GitHub (`X-Hub-Signature-256`): type `<X-GitHub-Event>.<action>` (or just the event), id the `X-GitHub-Delivery`. */
export function githubVerifier(): WebhookVerifier {
  return {
    scheme: "github",
    verify: (d, secrets) => checkGitHub(d, secrets),
    toEvent(r) {
      const event = requiredHeader(r, "x-github-event");
      const id = requiredHeader(r, "x-github-delivery");
      const data = githubPayload(r);
      const action = isObject(data) && typeof data.action === "string" && data.action !== "" ? data.action : undefined;
      return { type: action ? `${event}.${action}` : event, id, source: defaultSource(r), data };
    },
  };
}

/** Standard Webhooks / Svix: the payload's `type` and `data`, id the `webhook-id`, time its `timestamp`. */
export function standardWebhooksVerifier(opts: ToleranceOptions = {}): WebhookVerifier {
  const tolerance = opts.toleranceSeconds ?? 300;
  return {
    scheme: "standard-webhooks",
    verify: (d, secrets, now, variable) => checkStandardWebhooks(d, secrets, tolerance, now, variable),
    toEvent(r) {
      const p = jsonObject(r);
      const time = typeof p.timestamp === "string" && !Number.isNaN(Date.parse(p.timestamp)) ? new Date(p.timestamp).toISOString() : undefined;
      return {
        type: stringField(p, "type", "the payload"),
        id: standardWebhooksHeader(r.headers, "id")!,
        source: defaultSource(r),
        data: p.data ?? null,
        ...(time ? { time } : {}),
      };
    },
  };
}

export interface HmacVerifierOptions extends HmacScheme {
  /** A header naming the delivery (its dedupe id); without one the id is the SHA-256 of the signature header, so a resent delivery is the same event. */
  idHeader?: string;
  /** The event type when the JSON body has no string `type` (default: the webhook's name). */
  type?: string;
}

const toHex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/** A generic HMAC signature (Shopify, Slack, in-house senders). */
export function hmacVerifier(opts: HmacVerifierOptions): WebhookVerifier {
  checkHmacScheme(opts);
  return {
    scheme: "hmac",
    verify: (d, secrets, now) => checkHmac(d, secrets, opts, now),
    async toEvent(r) {
      let data: unknown;
      try {
        data = r.json();
      } catch {
        data = r.text();
      }
      const bodyType = isObject(data) && typeof data.type === "string" && data.type !== "" ? data.type : undefined;
      const given = opts.idHeader ? requiredHeader(r, opts.idHeader) : undefined;
      const id = given ?? toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(r.headers.get(opts.header) ?? ""))));
      return { type: bodyType ?? opts.type ?? r.name, id, source: defaultSource(r), data };
    },
  };
}
