/**
 * Webhook signature schemes, pure and on Web Crypto only (Workers, Deno and
 * Node alike). Each check runs over the RAW body bytes as received — never a
 * re-serialized JSON — and compares MACs in constant time (every byte of
 * equal-length values is looked at; a length mismatch says nothing about the
 * secret). Several secrets are tried in turn so a rotation accepts both the
 * old and the new one.
 *
 * - Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…]`, HMAC-SHA256 of
 *   `<t>.<body>` with the endpoint secret (`whsec_…`, used as text), `t` within
 *   the tolerance (default 300 s) of now.
 * - GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body; no
 *   timestamp — a replay is stopped by the delivery id (`X-GitHub-Delivery`).
 * - Standard Webhooks (Svix): `webhook-id`, `webhook-timestamp`,
 *   `webhook-signature: v1,<base64> [v1,<base64>…]` (or the `svix-*` names),
 *   HMAC-SHA256 of `<id>.<timestamp>.<body>` keyed by the base64 secret after
 *   its `whsec_` prefix, the timestamp within the tolerance.
 * - Generic HMAC: a header holding `<prefix><hex|base64>` of an HMAC (SHA-1,
 *   SHA-256, SHA-384 or SHA-512) over a template of the body and, optionally,
 *   a timestamp header's value.
 */
import { decodeBase64 } from "./cloudevent-syntax.ts";
import { ConfigurationError } from "./errors.ts";

export type HmacAlgorithm = "SHA-1" | "SHA-256" | "SHA-384" | "SHA-512";
export type SignatureEncoding = "hex" | "base64";

/** A delivery as received: its headers and the exact bytes of its body. */
export interface RawDelivery {
  headers: Headers;
  body: Uint8Array;
}

/** Accepted, or why not (said to the sender: no secret material in it). */
export type SignatureCheck = { ok: true } | { ok: false; reason: string };

const encoder = new TextEncoder();
const keys = new Map<string, Promise<CryptoKey>>();

function hmacKey(secret: Uint8Array, hash: HmacAlgorithm): Promise<CryptoKey> {
  const cacheKey = `${hash}:${Array.from(secret).join(",")}`;
  let key = keys.get(cacheKey);
  if (!key) {
    key = crypto.subtle.importKey("raw", secret as BufferSource, { name: "HMAC", hash }, false, ["sign"]);
    if (keys.size > 64) keys.clear(); // a handful of secrets per app; never an unbounded cache
    keys.set(cacheKey, key);
  }
  return key;
}

export async function hmac(secret: Uint8Array, hash: HmacAlgorithm, message: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.sign("HMAC", await hmacKey(secret, hash), message as BufferSource));
}

export function concatBytes(...parts: (string | Uint8Array)[]): Uint8Array {
  const bytes = parts.map((p) => (typeof p === "string" ? encoder.encode(p) : p));
  const out = new Uint8Array(bytes.reduce((n, b) => n + b.byteLength, 0));
  let at = 0;
  for (const b of bytes) {
    out.set(b, at);
    at += b.byteLength;
  }
  return out;
}

/** Constant-time for equal lengths: every byte is compared, no early exit. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  let diff = 0;
  for (let i = 0; i < a.byteLength; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export function decodeHex(s: string): Uint8Array | null {
  if (s.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(s)) return null;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(i * 2, i * 2 + 2), 16);
  return out;
}

export function decodeSignature(s: string, encoding: SignatureEncoding): Uint8Array | null {
  return encoding === "hex" ? decodeHex(s.trim()) : decodeBase64(s.trim());
}

/** Whether any candidate signature equals the MAC of `message` under any secret. */
async function anyMatches(secrets: readonly Uint8Array[], hash: HmacAlgorithm, message: Uint8Array, candidates: readonly Uint8Array[]): Promise<boolean> {
  let matched = false;
  // Every secret and every candidate is tried (no early return), so the time taken
  // does not tell which secret matched.
  for (const secret of secrets) {
    const expected = await hmac(secret, hash, message);
    for (const c of candidates) matched = bytesEqual(expected, c) || matched;
  }
  return matched;
}

const textSecrets = (secrets: readonly string[]) => secrets.map((s) => encoder.encode(s));

/** Unix seconds within `tolerance` of now (either way: a clock a little ahead is not an attack, far ahead is). */
function timestampCheck(raw: string | null | undefined, toleranceSeconds: number, nowSeconds: number): SignatureCheck {
  if (!raw || !/^\d{1,12}$/.test(raw)) return { ok: false, reason: "the signature's timestamp is missing or not a number of seconds" };
  if (Math.abs(nowSeconds - Number(raw)) > toleranceSeconds) return { ok: false, reason: `the signature's timestamp is more than ${toleranceSeconds} s from now (a replayed or delayed delivery)` };
  return { ok: true };
}

const MISMATCH: SignatureCheck = { ok: false, reason: "the signature does not match the body (wrong secret, or the body was changed)" };

export async function checkStripe(d: RawDelivery, secrets: readonly string[], toleranceSeconds: number, nowSeconds: number): Promise<SignatureCheck> {
  const header = d.headers.get("stripe-signature");
  if (!header) return { ok: false, reason: "the Stripe-Signature header is missing" };
  let t: string | undefined;
  const v1: Uint8Array[] = [];
  for (const item of header.split(",")) {
    const eq = item.indexOf("=");
    const k = item.slice(0, eq).trim();
    const v = item.slice(eq + 1).trim();
    if (k === "t") t = v;
    else if (k === "v1") {
      const sig = decodeHex(v);
      if (sig) v1.push(sig);
    }
  }
  if (v1.length === 0) return { ok: false, reason: "the Stripe-Signature header has no v1 signature" };
  const when = timestampCheck(t, toleranceSeconds, nowSeconds);
  if (!when.ok) return when;
  return (await anyMatches(textSecrets(secrets), "SHA-256", concatBytes(`${t}.`, d.body), v1)) ? { ok: true } : MISMATCH;
}

export async function checkGitHub(d: RawDelivery, secrets: readonly string[]): Promise<SignatureCheck> {
  const header = d.headers.get("x-hub-signature-256");
  if (!header) return { ok: false, reason: "the X-Hub-Signature-256 header is missing" };
  const sig = header.startsWith("sha256=") ? decodeHex(header.slice(7)) : null;
  if (!sig) return { ok: false, reason: "the X-Hub-Signature-256 header is not sha256=<hex>" };
  return (await anyMatches(textSecrets(secrets), "SHA-256", d.body, [sig])) ? { ok: true } : MISMATCH;
}

/** A Standard Webhooks secret (`whsec_<base64>`) to its key bytes; a malformed one is the server's configuration to fix. */
export function standardWebhooksKey(secret: string, variable?: string): Uint8Array {
  const key = decodeBase64(secret.startsWith("whsec_") ? secret.slice(6) : secret);
  if (!key || key.byteLength === 0) throw new ConfigurationError("a Standard Webhooks secret must be base64 (optionally prefixed whsec_)", variable);
  return key;
}

/** The Standard Webhooks headers, or their `svix-*` names (Svix sends either). */
export function standardWebhooksHeader(h: Headers, name: "id" | "timestamp" | "signature"): string | null {
  return h.get(`webhook-${name}`) ?? h.get(`svix-${name}`);
}

export async function checkStandardWebhooks(d: RawDelivery, secrets: readonly string[], toleranceSeconds: number, nowSeconds: number, variable?: string): Promise<SignatureCheck> {
  const id = standardWebhooksHeader(d.headers, "id");
  const timestamp = standardWebhooksHeader(d.headers, "timestamp");
  const header = standardWebhooksHeader(d.headers, "signature");
  if (!id || !header) return { ok: false, reason: "the webhook-id or webhook-signature header is missing" };
  const when = timestampCheck(timestamp, toleranceSeconds, nowSeconds);
  if (!when.ok) return when;
  const v1 = header
    .split(" ")
    .filter((s) => s.startsWith("v1,"))
    .flatMap((s) => {
      const sig = decodeBase64(s.slice(3));
      return sig ? [sig] : [];
    });
  if (v1.length === 0) return { ok: false, reason: "the webhook-signature header has no v1 signature" };
  const keysOf = secrets.map((s) => standardWebhooksKey(s, variable));
  return (await anyMatches(keysOf, "SHA-256", concatBytes(`${id}.${timestamp}.`, d.body), v1)) ? { ok: true } : MISMATCH;
}

export interface HmacScheme {
  /** The header holding the signature, e.g. `x-shopify-hmac-sha256`. */
  header: string;
  /** Default SHA-256. */
  algorithm?: HmacAlgorithm;
  /** Default hex. */
  encoding?: SignatureEncoding;
  /** Text before the signature in the header, e.g. `sha256=` or `v0=`. */
  prefix?: string;
  /** A header holding the delivery's Unix time in seconds; the signature then covers it (see `signedPayload`). */
  timestampHeader?: string;
  /** With `timestampHeader` (default 300 s). */
  toleranceSeconds?: number;
  /**
   * What is signed, with `{body}` (exactly once) and `{timestamp}` in it:
   * default `{timestamp}.{body}` with a timestamp header, `{body}` without
   * (Slack: `v0:{timestamp}:{body}`).
   */
  signedPayload?: string;
}

/** The signed bytes of a template: the raw body spliced in, never decoded and re-encoded. */
export function signedBytes(template: string, timestamp: string, body: Uint8Array): Uint8Array {
  const parts = template.split("{body}");
  if (parts.length !== 2) throw new TypeError("signedPayload must contain {body} exactly once");
  const fill = (s: string) => s.split("{timestamp}").join(timestamp);
  return concatBytes(fill(parts[0]!), body, fill(parts[1]!));
}

export function checkHmacScheme(scheme: HmacScheme): void {
  if (typeof scheme.header !== "string" || !/^[A-Za-z0-9-]+$/.test(scheme.header)) throw new TypeError("hmac: header must be a header name");
  if (scheme.algorithm !== undefined && !["SHA-1", "SHA-256", "SHA-384", "SHA-512"].includes(scheme.algorithm)) throw new TypeError(`hmac: unsupported algorithm "${String(scheme.algorithm)}"`);
  if (scheme.encoding !== undefined && scheme.encoding !== "hex" && scheme.encoding !== "base64") throw new TypeError(`hmac: encoding must be hex or base64`);
  if (scheme.signedPayload !== undefined) signedBytes(scheme.signedPayload, "", new Uint8Array());
  if (scheme.signedPayload?.includes("{timestamp}") && !scheme.timestampHeader) throw new TypeError("hmac: signedPayload names {timestamp} but there is no timestampHeader");
}

export async function checkHmac(d: RawDelivery, secrets: readonly string[], s: HmacScheme, nowSeconds: number): Promise<SignatureCheck> {
  const header = d.headers.get(s.header);
  if (!header) return { ok: false, reason: `the ${s.header} header is missing` };
  const prefix = s.prefix ?? "";
  const sig = header.startsWith(prefix) ? decodeSignature(header.slice(prefix.length), s.encoding ?? "hex") : null;
  if (!sig) return { ok: false, reason: `the ${s.header} header is not ${prefix}<${s.encoding ?? "hex"}>` };
  let timestamp = "";
  if (s.timestampHeader) {
    timestamp = d.headers.get(s.timestampHeader) ?? "";
    const when = timestampCheck(timestamp, s.toleranceSeconds ?? 300, nowSeconds);
    if (!when.ok) return when;
  }
  const template = s.signedPayload ?? (s.timestampHeader ? "{timestamp}.{body}" : "{body}");
  return (await anyMatches(textSecrets(secrets), s.algorithm ?? "SHA-256", signedBytes(template, timestamp, d.body), [sig])) ? { ok: true } : MISMATCH;
}
