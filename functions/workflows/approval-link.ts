/**
 * Example: an approve/reject link for one request. The workflow makes a URL
 * of its own (`createWebhook`), hands it to the mailer through the outbox (an
 * `approval.link_requested` CloudEvent to EDDA_BROKER_URL, committed with the
 * step), and waits for the one POST to it:
 *
 *   curl -X POST "$LINK" -H 'content-type: application/json' -d '{"approved":true,"by":"ana"}'
 *
 * The first POST decides (later ones get 410 Gone); after `expiresInSeconds`
 * the link is dead and the request ends "expired". The link's token is not
 * stored anywhere: the database keeps its SHA-256 only.
 */
import * as z from "zod";
import { activity, createWebhook, sendEventTransactional, WebhookExpiredError, workflow } from "../../src/index.ts";

const decision = z.object({ approved: z.boolean(), by: z.string().max(200).optional() });

/** The mailer's job, as an outbox event: whoever sends the email subscribes to `approval.link_requested`. */
export const requestApprovalEmail = activity("request_approval_email", async (ctx, to: string, requestId: string, link: string, expiresAt: string | null) => {
  await sendEventTransactional(ctx, { type: "approval.link_requested", source: "edda-edge/examples/approval_link", subject: requestId, data: { to, requestId, link, expiresAt } });
  return { sentTo: to };
});

export const approvalLink = workflow(
  "approval_link",
  {
    description: 'Emails an approve/reject link (createWebhook) and waits for one POST of { "approved": true|false, "by"?: "..." } to it; ends "expired" when none comes in time.',
    input: z.object({ requestId: z.string().min(1).max(200), approver: z.string().min(1).max(320), expiresInSeconds: z.number().positive().max(30 * 24 * 3600).default(24 * 3600) }),
  },
  async (ctx, { requestId, approver, expiresInSeconds }) => {
    const hook = await createWebhook(ctx, { expiresIn: expiresInSeconds });
    await requestApprovalEmail(ctx, approver, requestId, hook.url, hook.expiresAt?.toISOString() ?? null);
    try {
      const { body } = await hook.wait();
      const d = decision.safeParse(body);
      if (!d.success) return { status: "invalid" as const, requestId };
      return { status: d.data.approved ? ("approved" as const) : ("rejected" as const), requestId, by: d.data.by ?? approver };
    } catch (err) {
      if (err instanceof WebhookExpiredError) return { status: "expired" as const, requestId };
      throw err;
    }
  },
);
