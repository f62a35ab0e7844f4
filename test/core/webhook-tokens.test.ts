// Per-wait webhook tokens (core/webhook-waits.ts), pure: the token is derived,
// not stored — HMAC-SHA256(EDDA_SECRET, instance, hook id, nonce), base64url,
// so replay derives the same URL again, and another instance (a fork), hook,
// nonce (a recurred run, a retried creation) or key gives another; the
// database keys a hook by the token's SHA-256 only; the URL starts with the
// public URL when there is one, else it is the path.
import { createHash, createHmac } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { WEBHOOK_TOKEN, webhookLink, webhookToken, webhookTokenHash, webhookWaitId } from "../../src/core/webhook-waits.ts";

describe("webhook tokens", () => {
  it("is HMAC-SHA256 over the instance, hook id and nonce, base64url: 43 characters", async () => {
    const token = await webhookToken("secret", "order-1", "webhook:1", "n0nce");
    const expected = createHmac("sha256", "secret").update("edda-webhook-v1\norder-1\nwebhook:1\nn0nce").digest("base64url");
    expect(token).toBe(expected);
    expect(token).toMatch(WEBHOOK_TOKEN);
    expect(await webhookTokenHash(token)).toBe(createHash("sha256").update(token).digest("hex"));
  });

  it("the same inputs give the same token (replay); any other instance, hook, nonce or key another", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string(), fc.string(), fc.string(), fc.string({ minLength: 1 }), async (instance, hook, nonce, key) => {
        const token = await webhookToken(key, instance, hook, nonce);
        expect(await webhookToken(key, instance, hook, nonce)).toBe(token);
        expect(token).toMatch(WEBHOOK_TOKEN);
        expect(await webhookToken(key, `${instance}x`, hook, nonce)).not.toBe(token);
        expect(await webhookToken(key, instance, `${hook}x`, nonce)).not.toBe(token);
        expect(await webhookToken(key, instance, hook, `${nonce}x`)).not.toBe(token);
        expect(await webhookToken(`${key}x`, instance, hook, nonce)).not.toBe(token);
      }),
      { numRuns: 50 },
    );
  });

  it("a link is the path, or the public URL with it; the wait's id is the hook's with :wait", () => {
    const token = "a".repeat(43);
    expect(webhookLink({ key: "k" }, token)).toEqual({ path: `/hooks/${token}`, url: `/hooks/${token}` });
    expect(webhookLink({ key: "k", baseUrl: "https://edda.example.com/app/" }, token)).toEqual({ path: `/hooks/${token}`, url: `https://edda.example.com/hooks/${token}` });
    expect(webhookWaitId("webhook:3")).toBe("webhook:3:wait");
  });
});
