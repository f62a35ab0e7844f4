/** Example: wait for a `payment.completed` CloudEvent (POST / or /events). */
import { z } from "zod";
import { waitEvent, workflow } from "../../src/index.ts";

export const paymentWait = workflow("payment_wait", { input: z.object({ orderId: z.string().min(1) }) }, async (ctx, { orderId }) => {
  const event = await waitEvent(ctx, "payment.completed", { timeoutSeconds: 300, schema: z.object({ amount: z.number() }).passthrough() });
  return { orderId, amount: event.data.amount };
});
