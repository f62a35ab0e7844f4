// Webhook signature schemes (core/webhook-signatures.ts), pure Web Crypto,
// against signatures made here with node:crypto — not with the module's own
// code: Stripe's `t=…,v1=…` within its tolerance either way, GitHub's
// `sha256=<hex>` of the raw body, Standard Webhooks' `v1,<base64>` list keyed
// by the whsec_ secret (svix-* names too), and the generic HMAC scheme's
// prefixes, encodings, algorithms and signed-payload templates. Every
// configured secret is tried (rotation); a refusal says why without secret
// material. The route over them (order of 404/503/401/400): webhook-route.unit.test.ts.
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../../src/core/errors.ts";
import { checkGitHub, checkHmac, checkHmacScheme, checkStandardWebhooks, checkStripe, signedBytes, standardWebhooksKey } from "../../src/core/webhook-signatures.ts";

const NOW = 1_764_849_600;
const body = new TextEncoder().encode('{"id":"evt_1","amount":5}');
const delivery = (headers: Record<string, string>, b: Uint8Array = body) => ({ headers: new Headers(headers), body: b });
const mac = (algorithm: string, key: string | Buffer, ...parts: (string | Uint8Array)[]) => {
  const h = createHmac(algorithm, key);
  for (const p of parts) h.update(p);
  return h.digest();
};

describe("Stripe", () => {
  const stripeHeader = (secret: string, t: number, extra = "") => `t=${t},v1=${mac("sha256", secret, `${t}.`, body).toString("hex")}${extra}`;
  it("accepts a v1 signature of `t.body` within the tolerance, either way; refuses one outside it with the reason", async () => {
    for (const t of [NOW, NOW - 300, NOW + 300]) expect(await checkStripe(delivery({ "stripe-signature": stripeHeader("whsec_a", t) }), ["whsec_a"], 300, NOW), String(t)).toEqual({ ok: true });
    for (const t of [NOW - 301, NOW + 301]) {
      const r = await checkStripe(delivery({ "stripe-signature": stripeHeader("whsec_a", t) }), ["whsec_a"], 300, NOW);
      expect(r).toEqual({ ok: false, reason: expect.stringContaining("300 s") });
    }
  });

  it("tries every configured secret and every v1 in the header; ignores other schemes", async () => {
    const header = `${stripeHeader("whsec_new", NOW)},v1=${"00".repeat(32)},v0=${"11".repeat(32)}`;
    expect(await checkStripe(delivery({ "stripe-signature": header }), ["whsec_old", "whsec_new"], 300, NOW)).toEqual({ ok: true });
    expect(await checkStripe(delivery({ "stripe-signature": header }), ["whsec_old"], 300, NOW)).toMatchObject({ ok: false, reason: expect.stringContaining("does not match") });
    expect(await checkStripe(delivery({ "stripe-signature": `t=${NOW},v0=${"11".repeat(32)}` }), ["whsec_new"], 300, NOW)).toMatchObject({ ok: false, reason: expect.stringContaining("no v1") });
    expect(await checkStripe(delivery({}), ["whsec_new"], 300, NOW)).toMatchObject({ ok: false, reason: expect.stringContaining("missing") });
    const tampered = new TextEncoder().encode('{"id":"evt_1","amount":500}');
    expect((await checkStripe(delivery({ "stripe-signature": stripeHeader("whsec_new", NOW) }, tampered), ["whsec_new"], 300, NOW)).ok).toBe(false);
  });
});

describe("GitHub", () => {
  it("sha256=<hex> HMAC of the raw body; sha1 or a bare hex is refused as malformed", async () => {
    const sig = mac("sha256", "gh-secret", body).toString("hex");
    expect(await checkGitHub(delivery({ "x-hub-signature-256": `sha256=${sig}` }), ["other", "gh-secret"])).toEqual({ ok: true });
    for (const header of [`sha1=${sig}`, sig, "sha256=zz"]) expect(await checkGitHub(delivery({ "x-hub-signature-256": header }), ["gh-secret"])).toMatchObject({ ok: false, reason: expect.stringContaining("not sha256=<hex>") });
    expect(await checkGitHub(delivery({ "x-hub-signature-256": `sha256=${sig}` }), ["wrong"])).toMatchObject({ ok: false });
  });
});

describe("Standard Webhooks", () => {
  const key = Buffer.from("standard-webhooks-test-key-32byt");
  const secret = `whsec_${key.toString("base64")}`;
  const sign = (id: string, t: number) => `v1,${mac("sha256", key, `${id}.${t}.`, body).toString("base64")}`;
  it("v1,<base64> over `id.timestamp.body`, keyed by the base64 after whsec_; webhook-* or svix-* names; other versions ignored", async () => {
    expect(await checkStandardWebhooks(delivery({ "webhook-id": "msg_1", "webhook-timestamp": String(NOW), "webhook-signature": `v2,abc ${sign("msg_1", NOW)}` }), [secret], 300, NOW)).toEqual({ ok: true });
    expect(await checkStandardWebhooks(delivery({ "svix-id": "msg_1", "svix-timestamp": String(NOW), "svix-signature": sign("msg_1", NOW) }), [secret], 300, NOW)).toEqual({ ok: true });
    expect(await checkStandardWebhooks(delivery({ "webhook-id": "msg_2", "webhook-timestamp": String(NOW), "webhook-signature": sign("msg_1", NOW) }), [secret], 300, NOW)).toMatchObject({ ok: false });
    expect(await checkStandardWebhooks(delivery({ "webhook-id": "msg_1", "webhook-timestamp": String(NOW - 600), "webhook-signature": sign("msg_1", NOW - 600) }), [secret], 300, NOW)).toMatchObject({ ok: false, reason: expect.stringContaining("timestamp") });
    expect(await checkStandardWebhooks(delivery({ "webhook-id": "msg_1", "webhook-timestamp": String(NOW), "webhook-signature": "v2,abc" }), [secret], 300, NOW)).toMatchObject({ ok: false, reason: expect.stringContaining("no v1") });
  });

  it("a secret that is not base64 is a ConfigurationError naming its variable", () => {
    expect(Array.from(standardWebhooksKey(secret))).toEqual(Array.from(key));
    expect(() => standardWebhooksKey("whsec_!!!", "EDDA_WEBHOOK_BILLING_SECRET")).toThrow(ConfigurationError);
    try {
      standardWebhooksKey("", "EDDA_WEBHOOK_BILLING_SECRET");
    } catch (e) {
      expect((e as ConfigurationError).variable).toBe("EDDA_WEBHOOK_BILLING_SECRET");
    }
  });
});

describe("generic HMAC", () => {
  it("a prefix, hex or base64, SHA-1 to SHA-512, and a template with the timestamp (Slack: v0:{timestamp}:{body})", async () => {
    const shopify = { header: "x-shopify-hmac-sha256", encoding: "base64" as const };
    expect(await checkHmac(delivery({ "x-shopify-hmac-sha256": mac("sha256", "shop", body).toString("base64") }), ["shop"], shopify, NOW)).toEqual({ ok: true });
    const slack = { header: "x-slack-signature", prefix: "v0=", timestampHeader: "x-slack-request-timestamp", signedPayload: "v0:{timestamp}:{body}" };
    const slackSig = `v0=${mac("sha256", "slack", `v0:${NOW}:`, body).toString("hex")}`;
    expect(await checkHmac(delivery({ "x-slack-signature": slackSig, "x-slack-request-timestamp": String(NOW) }), ["slack"], slack, NOW)).toEqual({ ok: true });
    expect(await checkHmac(delivery({ "x-slack-signature": slackSig, "x-slack-request-timestamp": String(NOW - 301) }), ["slack"], slack, NOW)).toMatchObject({ ok: false });
    expect(await checkHmac(delivery({ "x-slack-signature": slackSig.slice(3) }), ["slack"], slack, NOW)).toMatchObject({ ok: false, reason: expect.stringContaining("not v0=<hex>") });
    const sha512 = { header: "x-sig", algorithm: "SHA-512" as const, timestampHeader: "x-ts" };
    expect(await checkHmac(delivery({ "x-sig": mac("sha512", "k", `${NOW}.`, body).toString("hex"), "x-ts": String(NOW) }), ["k"], sha512, NOW)).toEqual({ ok: true });
    expect(await checkHmac(delivery({ "x-sig": mac("sha1", "k", body).toString("hex") }), ["k"], { header: "x-sig", algorithm: "SHA-1" }, NOW)).toEqual({ ok: true });
  });

  it("the signed bytes are the raw body spliced in, never decoded; a scheme that cannot work is a TypeError when declared", () => {
    const raw = new Uint8Array([0xff, 0xfe, 0x00]);
    expect(Array.from(signedBytes("a{timestamp}:{body}:z", "7", raw))).toEqual([0x61, 0x37, 0x3a, 0xff, 0xfe, 0x00, 0x3a, 0x7a]);
    expect(() => checkHmacScheme({ header: "x sig" })).toThrow(/header name/);
    expect(() => checkHmacScheme({ header: "x-sig", algorithm: "MD5" as never })).toThrow(/unsupported algorithm/);
    expect(() => checkHmacScheme({ header: "x-sig", encoding: "base32" as never })).toThrow(/hex or base64/);
    expect(() => checkHmacScheme({ header: "x-sig", signedPayload: "{body}{body}" })).toThrow(/exactly once/);
    expect(() => checkHmacScheme({ header: "x-sig", signedPayload: "{timestamp}.{body}" })).toThrow(/no timestampHeader/);
    expect(() => checkHmacScheme({ header: "x-sig", timestampHeader: "x-ts", signedPayload: "{timestamp}.{body}" })).not.toThrow();
  });
});
