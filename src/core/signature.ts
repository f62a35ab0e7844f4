/**
 * HMAC-SHA256 request signatures for the internal routes (`/_edda/step`,
 * `/_edda/sweep`) and the follow-up requests the http dispatcher sends.
 * Web Crypto, so it runs on Workers, Deno and Node alike — except on Node,
 * where the same HMAC comes from node:crypto's synchronous `createHmac`
 * (Web Crypto runs each call as an async job there: a thread-pool hop, a
 * promise and its buffers per request, about 6 % of an http step's CPU). The MAC
 * covers the method, the path, the query string, the timestamp and the body
 * (one per line), so a captured request cannot be replayed against another
 * route (a step request against /_edda/sweep), with another query or with
 * another body; verification is constant-time and rejects timestamps outside
 * the window (±60 s). The host is not covered, on purpose: the URL a sender
 * signs and the one the receiver sees differ on real platforms (`wrangler dev
 * --host` and Workers routes rewrite `request.url` to the upstream host, proxies
 * rewrite Host), so a signed host would refuse every follow-up there; the
 * per-deployment EDDA_SECRET is what binds a request to its deployment.
 * A step request replayed inside the window runs nothing: each names the
 * lease it continues, and a spent lease is a no-op (engine/step.ts,
 * docs/design.md "Security model").
 */
import { nodeBuiltin } from "./node-builtin.ts";

export const SIGNATURE_HEADER = "x-edda-signature";
export const TIMESTAMP_HEADER = "x-edda-timestamp";

const encoder = new TextEncoder();
const keyCache = new Map<string, Promise<CryptoKey>>();

type NodeHmac = (algorithm: "sha256", key: string) => { update(data: string, encoding: "utf8"): { digest(encoding: "hex"): string } };
/** node:crypto's `createHmac` on Node itself; null elsewhere (Web Crypto). */
const nodeHmac = nodeBuiltin<{ createHmac?: NodeHmac }>("node:crypto")?.createHmac ?? null;

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = keyCache.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    keyCache.set(secret, key);
  }
  return key;
}

function toHex(buf: ArrayBuffer): string {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** What a signature covers: the request's method, its URL path, its query string (`?…`, or none) and its body. */
export interface SignedRequest {
  method: string;
  path: string;
  /** The URL's search part including `?` (`URL.search`); empty or absent for none. */
  query?: string;
  body: string;
}

// A path or query never holds a newline (URLs percent-encode it), so the fields cannot run into each other.
// Without a query the string is the original v1 one, so senders that never use one are unchanged; with one
// it is v2, which names it: a query appended to a captured request changes the MAC.
const signedString = (r: SignedRequest, ts: number) =>
  r.query ? `v2\n${r.method.toUpperCase()}\n${r.path}\n${r.query}\n${ts}\n${r.body}` : `v1\n${r.method.toUpperCase()}\n${r.path}\n${ts}\n${r.body}`;

/** How far a signed request's timestamp may be from the receiver's clock, in seconds. */
export const SIGNATURE_WINDOW_SECONDS = 60;

/** The hex HMAC-SHA256 of `text` under `secret` (the same bytes either way: the text is UTF-8 encoded). */
async function hmacHex(secret: string, text: string): Promise<string> {
  if (nodeHmac) return nodeHmac("sha256", secret).update(text, "utf8").digest("hex");
  return toHex(await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(text)));
}

export async function sign(secret: string, request: SignedRequest, timestampSeconds = Math.floor(Date.now() / 1000)) {
  const mac = await hmacHex(secret, signedString(request, timestampSeconds));
  return { [TIMESTAMP_HEADER]: String(timestampSeconds), [SIGNATURE_HEADER]: `sha256=${mac}` };
}

function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

export async function verify(
  secret: string,
  request: SignedRequest,
  timestamp: string | null | undefined,
  signature: string | null | undefined,
  windowSeconds = SIGNATURE_WINDOW_SECONDS,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<boolean> {
  if (!timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return false;
  const ts = Number(timestamp);
  if (Math.abs(nowSeconds - ts) > windowSeconds) return false;
  const expected = (await sign(secret, request, ts))[SIGNATURE_HEADER];
  return constantTimeEqual(expected, signature);
}

export async function sha256Hex(text: string): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}
