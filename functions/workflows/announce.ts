/**
 * Example: publish a CloudEvent through the transactional outbox. The event
 * row commits with the activity's result (it exists iff the step committed);
 * the relay POSTs it to EDDA_BROKER_URL right after the commit, and the cron
 * sweep retries it until the broker takes it.
 */
import * as z from "zod";
import { activity, sendEventTransactional, workflow } from "../../src/index.ts";

export const recordAnnouncement = activity("record_announcement", async (ctx, type: string, data: unknown) => {
  const eventId = await sendEventTransactional(ctx, { type, source: "edda-edge/examples/announce", data });
  return { eventId };
});

export const announce = workflow(
  "announce",
  { input: z.object({ type: z.string().min(1).max(200), data: z.unknown().optional() }) },
  async (ctx, { type, data }) => recordAnnouncement(ctx, type, data ?? null),
);
