/**
 * Example: a rate limit (throttle). At most two `partner_call` runs per
 * partner start in any 10 s window; a start over the limit is accepted with
 * status `queued` and starts, in order, as soon as the window has room.
 */
import * as z from "zod";
import { activity, workflow } from "../../src/index.ts";

const callPartner = activity("call_partner", async (_ctx, partner: string, payload: string) => ({ partner, accepted: payload.length }));

export const partnerCall = workflow(
  "partner_call",
  {
    description: "Pushes one update to a partner API; at most 2 calls per partner per 10 s, the rest wait queued.",
    input: z.object({ partner: z.string().min(1).max(100), payload: z.string().max(10_000) }),
    rateLimit: { key: (input: { partner: string }) => input.partner, limit: 2, periodSeconds: 10 },
  },
  async (ctx, { partner, payload }) => callPartner(ctx, partner, payload),
);
