/**
 * HMAC-SHA256 request signatures for the internal routes (`/_edda/step`,
 * `/_edda/sweep`) and the follow-up requests the http dispatcher sends.
 * Web Crypto only, so it runs on Workers, Deno and Node alike. The MAC
 * covers the method, the path, the timestamp and the body (`v1`, one per
 * line), so a captured request cannot be replayed against another route (a
 * step request against /_edda/sweep) or with another body; verification is
 * constant-time and rejects timestamps outside the replay window (±300 s).
 */
export const SIGNATURE_HEADER = "x-edda-signature";
export const TIMESTAMP_HEADER = "x-edda-timestamp";

const encoder = new TextEncoder();
const keyCache = new Map<string, Promise<CryptoKey>>();

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

/** What a signature covers: the request's method, its URL path (no query) and its body. */
export interface SignedRequest {
  method: string;
  path: string;
  body: string;
}

// A path never holds a newline (URLs percent-encode it), so the fields cannot run into each other.
const signedString = (r: SignedRequest, ts: number) => `v1\n${r.method.toUpperCase()}\n${r.path}\n${ts}\n${r.body}`;

export async function sign(secret: string, request: SignedRequest, timestampSeconds = Math.floor(Date.now() / 1000)) {
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(signedString(request, timestampSeconds)));
  return { [TIMESTAMP_HEADER]: String(timestampSeconds), [SIGNATURE_HEADER]: `sha256=${toHex(mac)}` };
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
  windowSeconds = 300,
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
