/**
 * Example: an order waits for Stripe to say its Checkout Session was paid.
 * Stripe POSTs to /webhooks/stripe (declared in ./index.ts, verified with
 * EDDA_WEBHOOK_STRIPE_SECRET); a `checkout.session.completed` delivery whose
 * session carries `metadata.orderId` of this order wakes exactly this wait —
 * the event's data is the Stripe event's `data`, so the match names
 * `data.object.metadata.orderId`. A delivery that arrived before the wait
 * began is still found (lookback); Stripe's retries of one event are applied
 * once (its event id is the dedupe key).
 */
import * as z from "zod";
import { waitEvent, workflow } from "../../src/index.ts";

const completedSession = z.object({ object: z.object({ id: z.string(), metadata: z.record(z.string(), z.string()).optional() }).passthrough() }).passthrough();

export const stripeCheckout = workflow("stripe_checkout", { input: z.object({ orderId: z.string().min(1) }) }, async (ctx, { orderId }) => {
  const event = await waitEvent(ctx, "checkout.session.completed", {
    match: { "data.object.metadata.orderId": orderId },
    timeoutSeconds: 24 * 3600,
    schema: completedSession,
  });
  return { paid: true, sessionId: event.data.object.id };
});
