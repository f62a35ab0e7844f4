/**
 * Example: an order saga. Reserve stock, charge, ship; each step that succeeds
 * registers its undo. `failAt` makes that activity fail for good so the
 * compensations run (newest first): refund, then release.
 */
import * as z from "zod";
import { activity, registerCompensation, TerminalError, workflow } from "../../src/index.ts";

type FailAt = "payment" | "shipping" | undefined;

export const releaseInventory = activity("release_inventory", async (_ctx, orderId: string) => ({ released: orderId }));
export const refundPayment = activity("refund_payment", async (_ctx, orderId: string, amount: number) => ({ refunded: amount, orderId }));

export const reserveInventory = activity("reserve_inventory", async (_ctx, orderId: string) => ({ reservationId: `r-${orderId}` }));

export const chargePayment = activity("charge_payment", async (_ctx, orderId: string, amount: number, failAt: FailAt) => {
  if (failAt === "payment") throw new TerminalError(`payment declined for ${orderId}`);
  return { chargeId: `c-${orderId}`, amount };
});

export const shipOrder = activity("ship_order", async (_ctx, orderId: string, failAt: FailAt) => {
  if (failAt === "shipping") throw new TerminalError(`no carrier available for ${orderId}`);
  return { trackingNumber: `t-${orderId}` };
});

export const orderSaga = workflow(
  "order_saga",
  {
    description: "Order saga: reserves stock, charges the payment, ships. If a step fails for good, the steps done so far are undone (refund, then release).",
    input: z.object({
      orderId: z.string().min(1).describe("The order to fulfil"),
      amount: z.number().positive().describe("Amount to charge"),
      failAt: z.enum(["payment", "shipping"]).optional().describe("Make this step fail, to see the compensations run"),
    }),
    // Found by its order: GET /instances?tag=orderId:o1
    tags: (input) => ({ orderId: input.orderId }),
  },
  async (ctx, { orderId, amount, failAt }) => {
    await reserveInventory(ctx, orderId);
    await registerCompensation(ctx, releaseInventory, orderId);
    await chargePayment(ctx, orderId, amount, failAt);
    await registerCompensation(ctx, refundPayment, orderId, amount);
    await shipOrder(ctx, orderId, failAt);
    return { orderId, status: "shipped" as const };
  },
);
