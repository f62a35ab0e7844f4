/**
 * Payloads sealed at rest: the codec that turns a stored value's bytes into
 * what the database keeps, and the envelope that marks a sealed value in a
 * JSON text.
 *
 * A sealed value is the one-key object `{"$enc":"<base64>"}`, written where
 * the value's JSON text would be (a history record, an input, a message's
 * data). It is unambiguous for the same reason `$bytes` is: every `$` key of
 * user data is stored with one more `$` (serialization.ts), and the sequence
 * `{"` never occurs inside a JSON string, so a scan of the text for
 * `{"$enc":"` finds envelopes and nothing else. The bytes the codec seals
 * start with one type byte — `j` (the rest is JSON text) or `b` (raw bytes, a
 * value that was a top-level Uint8Array) — so opening restores the value
 * exactly. An envelope may sit inside another value's text (a message copied
 * into a history record by the database itself): opening replaces every
 * envelope of a text, then those its plaintext holds.
 *
 * The built-in codec (`encryptionCodec`) is AES-256-GCM with Web Crypto: a
 * fresh 96-bit IV per value, and a 5-byte header (version, key id) that is
 * also the additional data, so a value names the key it needs and a rotation
 * reads old values with old keys. A wrong or missing key is a
 * `PayloadDecryptionError`, never garbage: GCM's tag fails rather than
 * decrypting to something else. A custom codec (a KMS) implements the two
 * methods; Edda stores whatever bytes it returns.
 */
import { ConfigurationError, EddaError } from "./errors.ts";
import type { Payload } from "./model.ts";
import { fromBase64, toBase64 } from "./serialization.ts";

/** How payload bytes become what the database stores, and back (`encryptionCodec`, or your own KMS). */
export interface PayloadCodec {
  encode(plain: Uint8Array): Promise<Uint8Array>;
  decode(stored: Uint8Array): Promise<Uint8Array>;
}

/**
 * A stored payload could not be opened: it is sealed and no key is set, it
 * names a key that is not configured, or it fails authentication (another
 * key, or altered bytes). Not terminal for the workflow: the instance is
 * quarantined by its failed steps and resumes once the right key is set.
 */
export class PayloadDecryptionError extends EddaError {
  override name = "PayloadDecryptionError";
  constructor(
    message: string,
    readonly reason: "no_key" | "unknown_key" | "authentication_failed" | "malformed" | "codec_failed",
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** An event wait's `match` on the data of an event whose data is sealed: the database cannot look inside. */
export class EncryptedMatchError extends EddaError {
  override name = "EncryptedMatchError";
}

export const ENVELOPE_START = '{"$enc":"';
const ENVELOPE = /\{"\$enc":"([A-Za-z0-9+/]*={0,2})"\}/g;
/** A text that is one envelope and nothing else (a value sealed as a whole). */
const WHOLE = /^\{"\$enc":"([A-Za-z0-9+/]*={0,2})"\}$/;
/** Envelopes inside envelopes opened at most this deep (a message in a record in an archive is three). */
const MAX_NESTING = 8;

const TYPE_JSON = 0x6a; // "j"
const TYPE_BINARY = 0x62; // "b"
const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Whether a text holds a sealed value (anywhere in it). */
export const holdsSealed = (text: string): boolean => text.includes(ENVELOPE_START);

async function seal(codec: PayloadCodec, type: number, body: Uint8Array): Promise<string> {
  const plain = new Uint8Array(body.length + 1);
  plain[0] = type;
  plain.set(body, 1);
  return `${ENVELOPE_START}${toBase64(await codec.encode(plain))}"}`;
}

/** A value's JSON text sealed: the envelope text. */
export function sealJson(codec: PayloadCodec, json: string): Promise<string> {
  return seal(codec, TYPE_JSON, utf8.encode(json));
}

/** A stored payload sealed: always a JSON envelope (the type byte keeps bytes as bytes). */
export async function sealPayload(codec: PayloadCodec, p: Payload): Promise<Payload> {
  return { type: "json", json: p.type === "binary" ? await seal(codec, TYPE_BINARY, p.bytes) : await sealJson(codec, p.json) };
}

async function openBytes(codec: PayloadCodec | null, b64: string): Promise<Uint8Array> {
  if (!codec) throw new PayloadDecryptionError("a stored payload is encrypted and no key is set: set EDDA_ENCRYPTION_KEY (or EDDA_ENCRYPTION_KEYS, or the payloadCodec option) to the key it was written with", "no_key");
  let stored: Uint8Array;
  try {
    stored = fromBase64(b64);
  } catch (cause) {
    throw new PayloadDecryptionError("a stored payload's envelope is not base64", "malformed", { cause });
  }
  let plain: Uint8Array;
  try {
    plain = await codec.decode(stored);
  } catch (cause) {
    if (cause instanceof PayloadDecryptionError) throw cause;
    throw new PayloadDecryptionError(`the payload codec could not decode a stored payload: ${cause instanceof Error ? cause.message : String(cause)}`, "codec_failed", { cause });
  }
  if (plain.length === 0 || (plain[0] !== TYPE_JSON && plain[0] !== TYPE_BINARY)) throw new PayloadDecryptionError("a stored payload decoded to bytes of an unknown type", "malformed");
  return plain;
}

function jsonOf(plain: Uint8Array): string {
  const body = plain.subarray(1);
  if (plain[0] === TYPE_BINARY) return `{"$bytes":"${toBase64(body)}"}`;
  try {
    return fromUtf8.decode(body);
  } catch (cause) {
    throw new PayloadDecryptionError("a stored payload decoded to text that is not UTF-8", "malformed", { cause });
  }
}

/** The text with every sealed value in it replaced by its plaintext (nested ones too); unchanged when it holds none. */
export async function openJson(codec: PayloadCodec | null, text: string): Promise<string> {
  for (let depth = 0; holdsSealed(text); depth++) {
    if (depth === MAX_NESTING) throw new PayloadDecryptionError(`a stored payload nests sealed values deeper than ${MAX_NESTING}`, "malformed");
    const found = [...text.matchAll(ENVELOPE)];
    if (found.length === 0) throw new PayloadDecryptionError("a stored payload holds a malformed envelope", "malformed");
    const plains = await Promise.all(found.map((m) => openBytes(codec, m[1]!)));
    let out = "";
    let at = 0;
    found.forEach((m, i) => {
      out += text.slice(at, m.index) + jsonOf(plains[i]!);
      at = m.index + m[0].length;
    });
    text = out + text.slice(at);
  }
  return text;
}

/** A stored payload opened: a sealed top-level Uint8Array comes back as bytes. */
export async function openPayload(codec: PayloadCodec | null, p: Payload): Promise<Payload> {
  if (p.type === "binary" || !holdsSealed(p.json)) return p;
  const whole = WHOLE.exec(p.json);
  if (whole) {
    const plain = await openBytes(codec, whole[1]!);
    if (plain[0] === TYPE_BINARY) return { type: "binary", bytes: plain.slice(1) };
    return { type: "json", json: await openJson(codec, jsonOf(plain)) };
  }
  return { type: "json", json: await openJson(codec, p.json) };
}

// --- AES-256-GCM --------------------------------------------------------------------------------

const VERSION = 1;
const HEADER = 5; // version byte + 4-byte key id
const IV = 12;

interface LoadedKey {
  id: Uint8Array;
  key: CryptoKey;
}

/** Web Crypto's types want an ArrayBuffer-backed view; every view here is one (never a SharedArrayBuffer). */
const view = (b: Uint8Array) => b as Uint8Array<ArrayBuffer>;

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/** A key's id: the first 4 bytes of SHA-256 over the key (names the key in every value, reveals nothing of it). */
async function keyId(raw: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", view(raw))).slice(0, 4);
}

/** The bytes of a base64 key, or a ConfigurationError naming `variable`: exactly 32 bytes (AES-256). */
function rawKey(b64: string, variable: string, index: number): Uint8Array {
  let raw: Uint8Array;
  try {
    raw = fromBase64(b64.trim());
  } catch {
    throw new ConfigurationError(`${variable}: key ${index + 1} is not base64 (generate one with \`openssl rand -base64 32\`)`, variable);
  }
  if (raw.length !== 32) throw new ConfigurationError(`${variable}: key ${index + 1} is ${raw.length} bytes; AES-256 needs 32 (generate one with \`openssl rand -base64 32\`)`, variable);
  return raw;
}

/**
 * AES-256-GCM over Web Crypto with `keys` (base64 of 32 bytes each), newest
 * first: values are sealed with the first, opened with whichever key their
 * header names. Keys are checked at once (a ConfigurationError naming
 * `variable`) and imported on first use.
 */
export function encryptionCodec(keys: readonly string[], variable = "EDDA_ENCRYPTION_KEYS"): PayloadCodec {
  if (keys.length === 0) throw new ConfigurationError(`${variable}: no key given`, variable);
  const raws = keys.map((k, i) => rawKey(k, variable, i));
  let loaded: Promise<LoadedKey[]> | null = null;
  const load = () =>
    (loaded ??= Promise.all(raws.map(async (raw) => ({ id: await keyId(raw), key: await crypto.subtle.importKey("raw", view(raw), "AES-GCM", false, ["encrypt", "decrypt"]) }))));
  return {
    async encode(plain) {
      const [newest] = await load();
      const out = new Uint8Array(HEADER + IV + plain.length + 16);
      out[0] = VERSION;
      out.set(newest!.id, 1);
      const iv = crypto.getRandomValues(new Uint8Array(IV));
      out.set(iv, HEADER);
      const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: out.subarray(0, HEADER) }, newest!.key, view(plain));
      out.set(new Uint8Array(sealed), HEADER + IV);
      return out;
    },
    async decode(stored) {
      if (stored.length < HEADER + IV + 16 || stored[0] !== VERSION) throw new PayloadDecryptionError("a stored payload is not an AES-256-GCM value of this version", "malformed");
      const id = stored.subarray(1, HEADER);
      const all = await load();
      const k = all.find((c) => c.id.every((b, i) => b === id[i]));
      if (!k) {
        throw new PayloadDecryptionError(
          `a stored payload is encrypted with key ${hex(id)}, which is not among the configured keys (${all.map((c) => hex(c.id)).join(", ")}): add it to EDDA_ENCRYPTION_KEYS after the newest`,
          "unknown_key",
        );
      }
      try {
        const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: view(stored.subarray(HEADER, HEADER + IV)), additionalData: view(stored.subarray(0, HEADER)) }, k.key, view(stored.subarray(HEADER + IV)));
        return new Uint8Array(plain);
      } catch (cause) {
        throw new PayloadDecryptionError(`a stored payload encrypted with key ${hex(id)} fails authentication: it was altered, or written with another key of the same id`, "authentication_failed", { cause });
      }
    },
  };
}

/** The ids of keys as the errors name them (for logs and docs: `edda-edge` never prints a key). */
export async function encryptionKeyIds(keys: readonly string[]): Promise<string[]> {
  return Promise.all(keys.map(async (k, i) => hex(await keyId(rawKey(k, "EDDA_ENCRYPTION_KEYS", i)))));
}
