// Workflows the kit's own tests drive: the shapes a team adopting Edda Edge
// tests first — an approval with daily reminders and an escalation after
// seven days, a payment whose retries back off an hour each, an hourly
// schedule, a rate-limited partner call.
import * as z from "zod";
import { activity, MessageTimeoutError, waitMessage, workflow } from "../../src/index.ts";

export const DAY = 86_400;

/** Sends a reminder; the tests replace it with a double that records what it was asked. */
export const remind = activity("kit_remind", async (_ctx, _to: string, _day: number, _at: string) => ({ sent: false as boolean }));
export const escalate = activity("kit_escalate", async (_ctx, _requestId: string, _to: string) => ({ escalated: false as boolean }));

const decision = z.object({ approved: z.boolean(), by: z.string() });

/**
 * Up to 30 days for a decision on channel "decision": a reminder each day
 * without one, to the approver, and after 7 days the request escalates to the
 * manager (the approver's 7-day timeout), who is reminded from then on.
 */
export const expenseApproval = workflow(
  "kit_expense_approval",
  { input: z.object({ requestId: z.string(), approver: z.string(), manager: z.string() }) },
  async (ctx, { requestId, approver, manager }) => {
    let to = approver;
    for (let day = 1; day <= 30; day++) {
      try {
        const msg = await waitMessage(ctx, "decision", { timeoutSeconds: DAY });
        const d = decision.parse(msg.data);
        return { status: d.approved ? ("approved" as const) : ("rejected" as const), by: d.by, day };
      } catch (err) {
        if (!(err instanceof MessageTimeoutError)) throw err;
      }
      if (day === 7) {
        to = manager;
        await escalate(ctx, requestId, manager);
      }
      if (day < 30) await remind(ctx, to, day, (await ctx.now()).toISOString());
    }
    return { status: "expired" as const, by: null, day: 30 };
  },
);

/** A partner charge that fails while the partner is down: retried every hour, up to 6 attempts. */
export const charge = activity("kit_charge", async (_ctx, _orderId: string): Promise<{ receipt: string }> => ({ receipt: "real" }), {
  retry: { initialIntervalSeconds: 3600, backoffCoefficient: 1, maxIntervalSeconds: 3600, maxAttempts: 6, maxDurationSeconds: 10 * 3600 },
});

export const payment = workflow("kit_payment", { input: z.object({ orderId: z.string() }) }, async (ctx, { orderId }) => {
  const { receipt } = await charge(ctx, orderId);
  return { orderId, receipt };
});

export const rollup = activity("kit_rollup", async (_ctx, hour: string) => ({ hour }));

/** Every hour on the hour (UTC): one instance per tick. */
export const hourlyRollup = workflow(
  "kit_hourly_rollup",
  { schedule: { cron: "0 * * * *", timezone: "UTC", missed: "latest" }, input: z.object({ scheduledAt: z.iso.datetime() }) },
  async (ctx, { scheduledAt }) => rollup(ctx, scheduledAt.slice(0, 13)),
);

export const partnerSync = workflow(
  "kit_partner_sync",
  { input: z.object({ account: z.string() }), rateLimit: { key: () => "partner", limit: 2, periodSeconds: 60 } },
  async (ctx, { account }) => ({ account, at: (await ctx.now()).toISOString() }),
);

export const kitWorkflows = [expenseApproval, payment, hourlyRollup, partnerSync];
