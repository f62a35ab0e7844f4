// POST /webhooks/:name with deliveries signed by the senders' OWN libraries
// (stripe's generateTestHeaderString, @octokit/webhooks-methods' sign,
// standardwebhooks' Webhook.sign), on PGlite through app.request(). Valid
// deliveries start handlers and wake matching waits; a tampered body, a stale
// timestamp, a wrong secret, a missing signature and a replayed delivery each
// leave the database as it was (no dedupe row, no message, no instance), and
// valid traffic still flows afterwards. Secrets come from the environment
// (EDDA_WEBHOOK_<NAME>_SECRET, comma-separated) through withEnvironment. The
// route's refusals that need no database (unknown name, missing secret, a
// verified body toEvent cannot read, GitHub's bad signatures) are in
// webhook-route.unit.test.ts.
import { createHmac } from "node:crypto";
import { sign as githubSign } from "@octokit/webhooks-methods";
import { sql } from "drizzle-orm";
import { Webhook as StandardWebhook } from "standardwebhooks";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { githubVerifier, hmacVerifier, standardWebhooksVerifier, stripeVerifier, waitEvent, webhook, workflow } from "../../src/index.ts";
import type { EddaOptions } from "../../src/edda.ts";
import { readConfig, withEnvironment } from "../../src/platform/env.ts";
import { queryRows } from "../../src/storage/database.ts";
import { stripeCheckout } from "../../functions/workflows/stripe-checkout.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const STRIPE_OLD = "whsec_old_stripe_secret";
const STRIPE_NEW = "whsec_new_stripe_secret";
const GITHUB = "It's a Secret to Everybody";
const SVIX = `whsec_${Buffer.from("standard-webhooks-test-key-32byt").toString("base64")}`;
const SHOP = "shopify-shared-secret";
const SLACK = "slack-signing-secret";

const stripe = new Stripe("sk_test_unused");
const now = () => Math.floor(Date.now() / 1000);

const issueHandler = workflow("gh_issue_opened", { eventHandler: "issues.opened", input: z.object({ issue: z.object({ number: z.number() }) }).passthrough() }, async (_ctx, input) => ({ number: input.issue.number }));
const invoiceWait = workflow("svix_invoice_wait", { input: z.object({ invoiceId: z.string() }) }, async (ctx, { invoiceId }) => {
  const e = await waitEvent(ctx, "invoice.paid", { match: { "data.invoiceId": invoiceId }, timeoutSeconds: 600 });
  return { data: e.data, id: e.id, source: e.source };
});
const shopWait = workflow("shop_order_wait", async (ctx) => (await waitEvent(ctx, "orders/create", { timeoutSeconds: 600 })).data);
const slackWait = workflow("slack_wait", async (ctx) => (await waitEvent(ctx, "slack", { timeoutSeconds: 600 })).data);

let t: TestApp;
beforeAll(async () => {
  const env = {
    EDDA_WEBHOOK_STRIPE_SECRET: `${STRIPE_OLD}, ${STRIPE_NEW}`,
    EDDA_WEBHOOK_GITHUB_SECRET: GITHUB,
    EDDA_WEBHOOK_BILLING_SECRET: SVIX,
    EDDA_WEBHOOK_SHOP_SECRET: SHOP,
    EDDA_WEBHOOK_SLACK_SECRET: SLACK,
  };
  const declared: Omit<EddaOptions, "database" | "dispatcher"> = {
    workflows: [stripeCheckout, issueHandler, invoiceWait, shopWait, slackWait],
    webhooks: [
      webhook("stripe", { verify: stripeVerifier() }),
      webhook("github", { verify: githubVerifier() }),
      webhook("billing", { verify: standardWebhooksVerifier() }),
      webhook("shop", { verify: hmacVerifier({ header: "x-shopify-hmac-sha256", encoding: "base64", idHeader: "x-shopify-webhook-id" }), toEvent: (r) => ({ type: r.headers.get("x-shopify-topic")!, id: r.headers.get("x-shopify-webhook-id")!, source: "/shop", data: r.json() }) }),
      webhook("slack", { verify: hmacVerifier({ header: "x-slack-signature", prefix: "v0=", timestampHeader: "x-slack-request-timestamp", signedPayload: "v0:{timestamp}:{body}" }) }),
      webhook("unconfigured", { verify: githubVerifier() }),
    ],
  };
  const options = withEnvironment(declared, readConfig(env));
  t = makeTestApp(await openTestDatabase("pglite", "webhooks"), options);
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

async function counts() {
  const [r] = await queryRows<{ m: number; d: number; i: number }>(
    t.database.db,
    sql`SELECT (SELECT count(*)::int FROM channel_messages) AS m, (SELECT count(*)::int FROM cloudevent_dedupe) AS d, (SELECT count(*)::int FROM workflow_instances) AS i`,
  );
  return { messages: Number(r!.m), dedupe: Number(r!.d), instances: Number(r!.i) };
}

const post = (name: string, body: string, headers: Record<string, string>) => t.edda.app.request(`/webhooks/${name}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

async function expectUnchanged(res: Response | Promise<Response>, status: number, errorType: string) {
  const before = await counts();
  const r = await res;
  const body = (await r.json()) as { error_type: string; error: string };
  expect(r.status, JSON.stringify(body)).toBe(status);
  expect(body.error_type).toBe(errorType);
  expect(await counts()).toEqual(before);
  return body;
}

let seq = 0;
const stripeEvent = (orderId: string, type = "checkout.session.completed") =>
  JSON.stringify({ id: `evt_${++seq}`, object: "event", type, created: now(), data: { object: { id: `cs_test_${seq}`, object: "checkout.session", metadata: { orderId } } } });
const stripeHeader = (payload: string, secret = STRIPE_NEW, timestamp = now()) => ({ "stripe-signature": stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp }) });

describe("Stripe (Stripe-Signature)", () => {
  it("a checkout.session.completed for the order wakes stripe_checkout; another order's does not", async () => {
    const { instanceId } = await t.edda.start(stripeCheckout, { orderId: "ord_1" });
    await t.waitFor(instanceId, ["waiting_for_message"]);
    const other = stripeEvent("ord_other");
    const r1 = await post("stripe", other, stripeHeader(other));
    expect(r1.status).toBe(202);
    expect((await t.edda.getInstance(instanceId))!.status).toBe("waiting_for_message");
    const mine = stripeEvent("ord_1");
    const r2 = await post("stripe", mine, stripeHeader(mine));
    expect(r2.status).toBe(202);
    expect(await r2.json()).toMatchObject({ status: "accepted", id: JSON.parse(mine).id, duplicate: false });
    const done = await t.waitFor(instanceId);
    expect(done.output).toEqual({ paid: true, sessionId: JSON.parse(mine).data.object.id });
  });

  it("tampered body, stale timestamp, wrong secret, missing or garbled header: 401 and nothing stored; the wait stays", async () => {
    const { instanceId } = await t.edda.start(stripeCheckout, { orderId: "ord_2" });
    await t.waitFor(instanceId, ["waiting_for_message"]);
    const body = stripeEvent("ord_2");
    const tampered = body.replace("ord_2", "ord_X");
    await expectUnchanged(post("stripe", tampered, stripeHeader(body)), 401, "InvalidWebhookSignature");
    const stale = await expectUnchanged(post("stripe", body, stripeHeader(body, STRIPE_NEW, now() - 301)), 401, "InvalidWebhookSignature");
    expect(stale.error).toContain("300 s");
    await expectUnchanged(post("stripe", body, stripeHeader(body, "whsec_someone_else")), 401, "InvalidWebhookSignature");
    await expectUnchanged(post("stripe", body, {}), 401, "InvalidWebhookSignature");
    await expectUnchanged(post("stripe", body, { "stripe-signature": "t=abc,v1=zz" }), 401, "InvalidWebhookSignature");
    expect((await t.edda.getInstance(instanceId))!.status).toBe("waiting_for_message");
    // Valid traffic still flows.
    const ok = await post("stripe", body, stripeHeader(body));
    expect(ok.status).toBe(202);
    expect((await t.waitFor(instanceId)).output).toMatchObject({ paid: true });
  });

  it("a replayed delivery (the same signed request again) is accepted and changes nothing", async () => {
    const body = stripeEvent("ord_replay", "payment_intent.succeeded");
    const headers = stripeHeader(body);
    expect((await post("stripe", body, headers)).status).toBe(202);
    const before = await counts();
    const again = await post("stripe", body, headers);
    expect(again.status).toBe(202);
    expect(await again.json()).toMatchObject({ duplicate: true });
    expect(await counts()).toEqual(before);
  });

  it("both secrets of a rotation (comma-separated in EDDA_WEBHOOK_STRIPE_SECRET) are accepted", async () => {
    for (const secret of [STRIPE_OLD, STRIPE_NEW]) {
      const body = stripeEvent("ord_rotation", "customer.created");
      const before = await counts();
      const r = await post("stripe", body, stripeHeader(body, secret));
      expect(r.status).toBe(202);
      expect((await counts()).dedupe).toBe(before.dedupe + 1);
    }
  });

});

describe("GitHub (X-Hub-Signature-256, X-GitHub-Delivery)", () => {
  const gh = async (payload: string, delivery: string, secret = GITHUB, extra: Record<string, string> = {}) =>
    post("github", payload, { "x-github-event": "issues", "x-github-delivery": delivery, "x-hub-signature-256": await githubSign(secret, payload), ...extra });

  it("issues.opened starts its handler with the payload; the delivery id dedupes a redelivery", async () => {
    const payload = JSON.stringify({ action: "opened", issue: { number: 42 } });
    const r = await gh(payload, "d-1");
    const body = (await r.json()) as { instanceId: string };
    expect(r.status).toBe(202);
    expect((await t.waitFor(body.instanceId)).output).toEqual({ number: 42 });
    const before = await counts();
    const again = await gh(payload, "d-1");
    expect(await again.json()).toMatchObject({ duplicate: true });
    expect(await counts()).toEqual(before);
  });

  it("form-encoded deliveries (payload=…) are verified over the raw form body", async () => {
    const form = `payload=${encodeURIComponent(JSON.stringify({ action: "opened", issue: { number: 7 } }))}`;
    const r = await gh(form, "d-form", GITHUB, { "content-type": "application/x-www-form-urlencoded" });
    const body = (await r.json()) as { instanceId: string };
    expect(r.status).toBe(202);
    expect((await t.waitFor(body.instanceId)).output).toEqual({ number: 7 });
  });

});

describe("Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature)", () => {
  const sender = new StandardWebhook(SVIX);
  const deliver = (id: string, payload: string, at = new Date(), key = sender, names = "webhook") =>
    post("billing", payload, { [`${names}-id`]: id, [`${names}-timestamp`]: String(Math.floor(at.getTime() / 1000)), [`${names}-signature`]: key.sign(id, at, payload) });
  const invoice = (invoiceId: string) => JSON.stringify({ type: "invoice.paid", timestamp: new Date().toISOString(), data: { invoiceId, amount: 5 } });

  it("an invoice.paid delivery wakes the matching wait, with the webhook-id as the event id", async () => {
    const { instanceId } = await t.edda.start(invoiceWait, { invoiceId: "inv_1" });
    await t.waitFor(instanceId, ["waiting_for_message"]);
    expect((await deliver("msg_1", invoice("inv_1"))).status).toBe(202);
    expect((await t.waitFor(instanceId)).output).toEqual({ data: { invoiceId: "inv_1", amount: 5 }, id: "msg_1", source: "/webhooks/billing" });
  });

  it("svix-* header names are accepted too", async () => {
    expect((await deliver("msg_svix", invoice("inv_svix"), new Date(), sender, "svix")).status).toBe(202);
  });

  it("stale timestamp, tampered body, wrong key, replay: nothing changes", async () => {
    const payload = invoice("inv_bad");
    await expectUnchanged(deliver("msg_old", payload, new Date(Date.now() - 10 * 60_000)), 401, "InvalidWebhookSignature");
    await expectUnchanged(deliver("msg_future", payload, new Date(Date.now() + 10 * 60_000)), 401, "InvalidWebhookSignature");
    const at = new Date();
    await expectUnchanged(post("billing", payload.replace("inv_bad", "inv_other"), { "webhook-id": "msg_t", "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": sender.sign("msg_t", at, payload) }), 401, "InvalidWebhookSignature");
    const stranger = new StandardWebhook(`whsec_${Buffer.from("another-key-entirely-0123456789a").toString("base64")}`);
    await expectUnchanged(deliver("msg_k", payload, at, stranger), 401, "InvalidWebhookSignature");
    expect((await deliver("msg_once", payload, at)).status).toBe(202);
    const before = await counts();
    expect(await (await deliver("msg_once", payload, at)).json()).toMatchObject({ duplicate: true });
    expect(await counts()).toEqual(before);
  });
});

describe("generic HMAC", () => {
  it("Shopify-style: base64 HMAC-SHA256 of the body, a custom toEvent", async () => {
    const { instanceId } = await t.edda.start(shopWait, undefined);
    await t.waitFor(instanceId, ["waiting_for_message"]);
    const payload = JSON.stringify({ id: 820982911946154500, total: "10.00" });
    const sig = createHmac("sha256", SHOP).update(payload).digest("base64");
    const headers = { "x-shopify-hmac-sha256": sig, "x-shopify-topic": "orders/create", "x-shopify-webhook-id": "wh-1" };
    await expectUnchanged(post("shop", payload.replace("10.00", "0.00"), headers), 401, "InvalidWebhookSignature");
    expect((await post("shop", payload, headers)).status).toBe(202);
    expect((await t.waitFor(instanceId)).output).toEqual({ id: 820982911946154500, total: "10.00" });
  });

  it("Slack-style: v0=hex over v0:{timestamp}:{body}, the timestamp within 300 s", async () => {
    const { instanceId } = await t.edda.start(slackWait, undefined);
    await t.waitFor(instanceId, ["waiting_for_message"]);
    const payload = JSON.stringify({ text: "hello" });
    const signed = (ts: number) => ({ "x-slack-request-timestamp": String(ts), "x-slack-signature": `v0=${createHmac("sha256", SLACK).update(`v0:${ts}:${payload}`).digest("hex")}` });
    await expectUnchanged(post("slack", payload, signed(now() - 600)), 401, "InvalidWebhookSignature");
    const stale = signed(now() - 600);
    await expectUnchanged(post("slack", payload, { ...stale, "x-slack-request-timestamp": String(now()) }), 401, "InvalidWebhookSignature");
    expect((await post("slack", payload, signed(now()))).status).toBe(202);
    expect((await t.waitFor(instanceId)).output).toEqual({ text: "hello" });
  });
});
