// Per-wait webhooks in the test kit: a workflow's link (caught with a test
// double of the activity that sends it) takes POSTs through `callWebhook`,
// and `advance` stops at a hook's expiry in order with the timers — a link
// that expires after an hour loses to nothing, not to a 3-day timer.
import { describe, expect, it } from "vitest";
import { activity, createWebhook, onTimer, onWebhook, race, WebhookExpiredError, workflow } from "../../src/index.ts";
import { createTestEdda } from "../../src/testing/index.ts";

const sendLink = activity("kit_send_link", async (_ctx, url: string) => ({ sent: url.length > 0 }));
const linkApproval = workflow("kit_link_approval", async (ctx, input: { expiresIn?: number }) => {
  const hook = await createWebhook<{ ok: boolean }>(ctx, input.expiresIn ? { expiresIn: input.expiresIn } : {});
  await sendLink(ctx, hook.url);
  try {
    const r = await race(ctx, { approved: onWebhook(hook), late: onTimer(3 * 86_400) });
    return { decided: r.winner === "approved" ? r.value.body.ok : "timeout" };
  } catch (e) {
    if (e instanceof WebhookExpiredError) return { decided: "link expired" };
    throw e;
  }
});

async function kit() {
  const t = await createTestEdda({ workflows: [linkApproval], startAt: "2030-01-01T00:00:00.000Z" });
  const links: string[] = [];
  t.replaceActivity(sendLink, async (_ctx, url) => {
    links.push(url);
    return { sent: true };
  });
  return { t, links };
}

describe("test kit: per-wait webhooks", { timeout: 120_000 }, () => {
  it("the link's POST a day later wins the race against a 3-day timer; the next POST is 410; a made-up URL 404", async () => {
    const { t, links } = await kit();
    try {
      const p = await t.start(linkApproval, {});
      expect(links[0]).toMatch(/^\/hooks\/[A-Za-z0-9_-]{43}$/);
      await t.advance("1d");
      expect(await t.callWebhook(links[0]!, { ok: true })).toEqual({ status: 202 });
      expect((await t.result(p)).output).toEqual({ decided: true });
      expect(await t.callWebhook(links[0]!, { ok: false })).toEqual({ status: 410, reason: "fired" });
      expect(await t.callWebhook(`/hooks/${"A".repeat(43)}`, {})).toEqual({ status: 404 });
    } finally {
      await t.close();
    }
  });

  it("no POST: the timer wins after 3 days; a link that expires after an hour ends the race at its expiry, before the timer", async () => {
    const { t, links } = await kit();
    try {
      const late = await t.start(linkApproval, {});
      const expiring = await t.start(linkApproval, { expiresIn: 3600 });
      await t.advance("4d");
      expect((await t.result(late)).output).toEqual({ decided: "timeout" });
      expect((await t.result(expiring)).output).toEqual({ decided: "link expired" });
      expect((await t.history(expiring)).map((h) => `${h.activityId} ${h.eventType}`)).toContain("race:1 WebhookExpired");
      expect(await t.callWebhook(links[1]!, { ok: true })).toEqual({ status: 410, reason: "expired" });
    } finally {
      await t.close();
    }
  });
});
