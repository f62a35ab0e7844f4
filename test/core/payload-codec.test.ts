// The payload codec (core/payload-codec.ts) with no database: AES-256-GCM over
// Web Crypto, the envelope in a JSON text, rotation by key id, and the typed
// errors a wrong, missing or tampered key gives instead of garbage.
import { describe, expect, it } from "vitest";
import { encryptionCodec, encryptionKeyIds, openJson, openPayload, PayloadDecryptionError, sealJson, sealPayload, type PayloadCodec } from "../../src/core/payload-codec.ts";
import { fromBase64, fromJson, SealedValue, toBase64, toJson } from "../../src/core/serialization.ts";

const key = () => toBase64(crypto.getRandomValues(new Uint8Array(32)));
const [k1, k2] = [key(), key()];

async function reason(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(PayloadDecryptionError);
  return (err as PayloadDecryptionError).reason;
}

describe("encryptionCodec", () => {
  it("round-trips JSON, bytes and nested envelopes, and the sealed text holds none of the plaintext", async () => {
    const codec = encryptionCodec([k1]);
    const json = toJson({ secret: "canary-7f3a", at: new Date(0), raw: new Uint8Array([1, 2, 3]), $x: 1 });
    const sealed = await sealJson(codec, json);
    expect(sealed).toMatch(/^\{"\$enc":"[A-Za-z0-9+/=]+"\}$/);
    expect(sealed).not.toContain("canary");
    expect(await openJson(codec, sealed)).toBe(json);
    const bytes = await sealPayload(codec, { type: "binary", bytes: new Uint8Array([0, 255, 7]) });
    expect(bytes.type).toBe("json");
    expect(await openPayload(codec, bytes)).toEqual({ type: "binary", bytes: new Uint8Array([0, 255, 7]) });
    // A record holding a sealed value (a broadcast message copied into history), itself sealed.
    const inner = fromJson(sealed);
    expect(inner).toBeInstanceOf(SealedValue);
    const record = toJson({ name: "receive", data: inner });
    expect(record).toContain(sealed);
    const outer = await sealJson(codec, record);
    expect(fromJson(await openJson(codec, outer))).toEqual({ name: "receive", data: fromJson(json) });
  });

  it("the same value seals differently each time (a fresh IV)", async () => {
    const codec = encryptionCodec([k1]);
    expect(await sealJson(codec, '"x"')).not.toBe(await sealJson(codec, '"x"'));
  });

  it("rotation: newest key seals, older keys still open what they sealed", async () => {
    const old = await sealJson(encryptionCodec([k1]), '"old"');
    const rotated = encryptionCodec([k2, k1]);
    expect(await openJson(rotated, old)).toBe('"old"');
    const fresh = await sealJson(rotated, '"new"');
    expect(await openJson(encryptionCodec([k2]), fresh)).toBe('"new"');
    expect(await reason(openJson(encryptionCodec([k1]), fresh))).toBe("unknown_key");
  });

  it("a key it lacks, no key at all, and altered bytes are typed errors naming the key id", async () => {
    const sealed = await sealJson(encryptionCodec([k1]), '"v"');
    const [id1] = await encryptionKeyIds([k1]);
    const err = (await openJson(encryptionCodec([k2]), sealed).catch((e: unknown) => e)) as Error;
    expect(err.message).toContain(id1!);
    expect(await reason(openJson(null, sealed))).toBe("no_key");
    const b = fromBase64(sealed.slice(9, -2));
    b[b.length - 1]! ^= 1;
    expect(await reason(openJson(encryptionCodec([k1]), `{"$enc":"${toBase64(b)}"}`))).toBe("authentication_failed");
  });

  it("refuses keys that are not 32 bytes of base64, naming the variable", () => {
    expect(() => encryptionCodec([toBase64(new Uint8Array(16))], "EDDA_ENCRYPTION_KEY")).toThrow(/EDDA_ENCRYPTION_KEY: key 1 is 16 bytes/);
    expect(() => encryptionCodec(["not base64!"])).toThrow(/not base64/);
  });

  it("a custom codec (a KMS) stores what it returns; a codec that throws is a PayloadDecryptionError", async () => {
    const xor: PayloadCodec = { encode: async (p) => p.map((b) => b ^ 0x5a), decode: async (s) => s.map((b) => b ^ 0x5a) };
    const sealed = await sealJson(xor, '{"a":1}');
    expect(await openJson(xor, sealed)).toBe('{"a":1}');
    const failing: PayloadCodec = { encode: async (p) => p, decode: () => Promise.reject(new Error("kms unreachable")) };
    expect(await reason(openJson(failing, sealed))).toBe("codec_failed");
  });

  it("user data that looks like an envelope is escaped, never opened", async () => {
    const json = toJson({ $enc: "AAAA", s: '{"$enc":"AAAA"}' });
    expect(await openJson(null, json)).toBe(json);
    expect(fromJson(json)).toEqual({ $enc: "AAAA", s: '{"$enc":"AAAA"}' });
  });
});
