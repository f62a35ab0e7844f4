// POST /webhooks/:name, the refusals decided before ingestion, in the route's
// order: an unknown name is a 404, a declared one without a secret a 503
// naming its variable, a signature that does not hold over the raw body a
// 401, a verified body the sender's toEvent cannot read a 400 — each answered
// without the database (none is asked for, so nothing is stored). Signed with
// the senders' own libraries. Moved from webhooks.test.ts, which keeps the
// deliveries that are accepted, and the refusals that leave a wait waiting.
import { sign as githubSign } from "@octokit/webhooks-methods";
import Stripe from "stripe";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { githubVerifier, stripeVerifier, webhook } from "../../src/index.ts";
import type { EddaOptions } from "../../src/edda.ts";
import { readConfig, withEnvironment } from "../../src/platform/env.ts";
import { stripeCheckout } from "../../functions/workflows/stripe-checkout.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const STRIPE = "whsec_new_stripe_secret";
const GITHUB = "It's a Secret to Everybody";
const stripe = new Stripe("sk_test_unused");

const declared: Omit<EddaOptions, "database"> = {
  workflows: [stripeCheckout],
  webhooks: [webhook("stripe", { verify: stripeVerifier() }), webhook("github", { verify: githubVerifier() }), webhook("unconfigured", { verify: githubVerifier() })],
};
const t = appWithoutDatabase(withEnvironment(declared, readConfig({ EDDA_WEBHOOK_STRIPE_SECRET: STRIPE, EDDA_WEBHOOK_GITHUB_SECRET: GITHUB })));
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const post = (name: string, body: string, headers: Record<string, string>) => t.request(`/webhooks/${name}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
async function expectRefused(res: Promise<Response>, status: number, errorType: string) {
  const r = await res;
  const body = (await r.json()) as { error_type: string; error: string };
  expect(r.status, JSON.stringify(body)).toBe(status);
  expect(body.error_type).toBe(errorType);
  return body;
}

describe("the route", () => {
  it("an unknown webhook is a 404; one without a secret a 503 naming its variable; nothing stored", async () => {
    await expectRefused(post("nope", "{}", {}), 404, "NotFound");
    const body = await expectRefused(post("unconfigured", "{}", {}), 503, "ConfigurationError");
    expect(body).toMatchObject({ variable: "EDDA_WEBHOOK_UNCONFIGURED_SECRET" });
  });

  it("webhook names map one-to-one to their variables; a blank secret variable is a configuration error", () => {
    expect(() => webhook("Stripe-EU", { verify: stripeVerifier() })).toThrow(TypeError);
    expect(readConfig({ EDDA_WEBHOOK_STRIPE_EU_SECRET: "a,b" }).webhookSecrets).toEqual({ stripe_eu: ["a", "b"] });
    expect(() => readConfig({ EDDA_WEBHOOK_STRIPE_SECRET: " , " })).toThrow(/EDDA_WEBHOOK_STRIPE_SECRET/);
    expect(() => readConfig({ EDDA_WEBHOOK_STRIPE_SECRET: "" })).toThrow(/EDDA_WEBHOOK_STRIPE_SECRET/);
  });
});

describe("Stripe (Stripe-Signature)", () => {
  it("a verified body that is not a Stripe event is a 400, nothing stored", async () => {
    for (const body of ["not json", "[1,2]", JSON.stringify({ id: "evt_x" })]) {
      const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret: STRIPE, timestamp: Math.floor(Date.now() / 1000) });
      await expectRefused(post("stripe", body, { "stripe-signature": header }), 400, "InvalidWebhook");
    }
  });
});

describe("GitHub (X-Hub-Signature-256, X-GitHub-Delivery)", () => {
  it("tampered body and wrong secret: 401, nothing stored", async () => {
    const payload = JSON.stringify({ action: "opened", issue: { number: 1 } });
    const sig = await githubSign(GITHUB, payload);
    await expectRefused(post("github", payload.replace("1", "2"), { "x-github-event": "issues", "x-github-delivery": "d-t", "x-hub-signature-256": sig }), 401, "InvalidWebhookSignature");
    await expectRefused(post("github", payload, { "x-github-event": "issues", "x-github-delivery": "d-w", "x-hub-signature-256": await githubSign("not the secret", payload) }), 401, "InvalidWebhookSignature");
    await expectRefused(post("github", payload, { "x-github-event": "issues", "x-github-delivery": "d-n", "x-hub-signature-256": sig.replace("sha256=", "sha1=") }), 401, "InvalidWebhookSignature");
  });
});
