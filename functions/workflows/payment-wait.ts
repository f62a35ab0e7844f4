/**
 * Example: wait for the `payment.completed` CloudEvent of this order (POST / or
 * /events). The match is evaluated by the database: a payment for another order
 * never wakes this instance, and a payment that arrived after the instance
 * started but before it waited is still found (lookback).
 */
import * as z from "zod";
import { waitEvent, workflow } from "../../src/index.ts";

export const paymentWait = workflow("payment_wait", { input: z.object({ orderId: z.string().min(1) }) }, async (ctx, { orderId }) => {
  const event = await waitEvent(ctx, "payment.completed", {
    match: { "data.orderId": orderId },
    timeoutSeconds: 300,
    schema: z.object({ amount: z.number() }).passthrough(),
  });
  return { orderId, amount: event.data.amount };
});
