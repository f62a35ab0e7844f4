/**
 * Example: a safe code upgrade. The first version of this workflow e-mailed
 * the invoice as a PDF; this one sends a payment link. `patched(ctx,
 * "invoice-link")` keeps both paths: an instance that e-mailed its PDF before
 * the deploy (its history says so) replays the PDF path and goes on waiting
 * for the payment; new instances send the link. Before deploying a change
 * like this, `edda-edge verify-replay` replays every in-flight instance
 * against the new code: the same change without `patched()` is reported there
 * and, deployed anyway, parks the old instances instead of failing them.
 */
import * as z from "zod";
import { activity, patched, waitMessage, workflow } from "../../src/index.ts";

/** What the first version called (kept for the instances it started). */
export const emailInvoicePdf = activity("email_invoice_pdf", async (_ctx, invoiceId: string) => ({ sent: "pdf" as const, invoiceId }));
const sendPaymentLink = activity("send_payment_link", async (_ctx, invoiceId: string) => ({ sent: "link" as const, invoiceId, url: `https://pay.example.com/${encodeURIComponent(invoiceId)}` }));

export const sendInvoice = workflow(
  "send_invoice",
  {
    description: 'Sends an invoice (a payment link; instances started before that change e-mail a PDF), then waits for a message on channel "paid".',
    input: z.object({ invoiceId: z.string().min(1).max(100) }),
  },
  async (ctx, { invoiceId }) => {
    const delivery = (await patched(ctx, "invoice-link")) ? await sendPaymentLink(ctx, invoiceId) : await emailInvoicePdf(ctx, invoiceId);
    const payment = await waitMessage(ctx, "paid", { timeoutSeconds: 30 * 24 * 3600 });
    return { invoiceId, sent: delivery.sent, paid: payment.data };
  },
);
