// Contract cases: per-wait webhooks (workflow_webhooks) and their waits —
// `hook.wait()`'s and a race's — on every driver: the POST records at the
// bound wait's id and withdraws the race's timer and subscription marker, a
// POST after another branch won is `lost`, a used-up hook gives a later wait
// nothing, expiry and the timer sweep decide a race once, and a fork's rows.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { count, newInstance, uid, type ContractContext } from "./helpers.ts";

const DELIVERY = JSON.stringify({ body: "yes", contentType: "text/plain", headers: {} });

export function webhookWaitCases(ctx: ContractContext): void {
  /** An instance that created `webhook:1` and waits at `waitId` (`status`), with a race's timer at that id when asked. */
  async function waiting(waitId: string, status: "waiting_for_webhook" | "waiting_for_message", opts: { timer?: boolean; channel?: string; expiresInSeconds?: number } = {}) {
    const inst = await newInstance(ctx.storage);
    const tokenHash = uid("hash").padEnd(64, "0").slice(0, 64);
    await ctx.storage.createWaitWebhook({ instanceId: inst.instanceId, run: 1, hookId: "webhook:1", tokenHash, expiresInSeconds: opts.expiresInSeconds ?? null });
    expect(await ctx.storage.bindWaitWebhook(inst.instanceId, 1, "webhook:1", waitId)).toMatchObject({ status: "open", payload: null });
    if (opts.channel) {
      await ctx.storage.subscribe(inst.instanceId, opts.channel, "direct");
      await ctx.storage.setWaiting(inst.instanceId, opts.channel, waitId, 3600);
    }
    const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
    await ctx.storage.concludeStep(lease.fence, { status, currentActivityId: waitId, ...(opts.timer ? { timer: { timerId: waitId, activityId: waitId, delaySeconds: 3600 } } : {}) });
    return { id: inst.instanceId, tokenHash };
  }
  const left = async (id: string) => ({
    timers: await count(ctx.database, sql`SELECT 1 FROM workflow_timer_subscriptions WHERE instance_id = ${id}`),
    waiting: await count(ctx.database, sql`SELECT 1 FROM channel_subscriptions WHERE instance_id = ${id} AND activity_id IS NOT NULL`),
  });

  describe("per-wait webhooks", () => {
    it("a POST to a hook a race waits on records at the race's id and withdraws its timer; the next POST is gone (fired)", async () => {
      const w = await waiting("race:1", "waiting_for_webhook", { timer: true });
      expect(await ctx.storage.fireWaitWebhook(w.tokenHash, DELIVERY)).toEqual({ kind: "fired", instanceId: w.id, woken: true });
      expect((await ctx.storage.loadHistory(w.id)).map((h) => `${h.activityId} ${h.eventType}`)).toEqual(["race:1 WebhookReceived"]);
      expect((await ctx.storage.getInstance(w.id))!.status).toBe("running");
      expect(await left(w.id)).toEqual({ timers: 0, waiting: 0 });
      expect(await ctx.storage.fireWaitWebhook(w.tokenHash, DELIVERY)).toEqual({ kind: "gone", reason: "fired" });
    });

    it("beside a message branch: the POST clears the subscription's wait marker, so no delivery takes a message for the race", async () => {
      const w = await waiting("race:1", "waiting_for_message", { channel: "reply" });
      expect(await left(w.id)).toEqual({ timers: 0, waiting: 1 });
      expect(await ctx.storage.fireWaitWebhook(w.tokenHash, DELIVERY)).toMatchObject({ kind: "fired", woken: true });
      expect(await left(w.id)).toEqual({ timers: 0, waiting: 0 });
    });

    it("after the timer won the race: the POST is gone (lost), the view says cancelled, a later wait on the hook gets nothing", async () => {
      const w = await waiting("race:1", "waiting_for_webhook", { timer: true });
      await ctx.database.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = now() - interval '1 second' WHERE instance_id = ${w.id}`);
      expect(await ctx.storage.fireExpiredTimers(1000, w.id)).toEqual([w.id]);
      expect((await ctx.storage.getInstance(w.id))!.status).toBe("running");
      expect((await ctx.storage.loadHistory(w.id)).map((h) => `${h.activityId} ${h.eventType}`)).toEqual(["race:1 TimerExpired"]);
      expect(await ctx.storage.fireWaitWebhook(w.tokenHash, DELIVERY)).toEqual({ kind: "gone", reason: "lost" });
      expect((await ctx.storage.listWaitWebhooks(w.id, 10)).map((h) => h.status)).toEqual(["cancelled"]);
      expect(await ctx.storage.bindWaitWebhook(w.id, 1, "webhook:1", "webhook:1:wait")).toMatchObject({ status: "cancelled", payload: null });
    });

    it("a POST that came first is kept for the wait; once a wait took it, another wait gets nothing", async () => {
      const inst = await newInstance(ctx.storage);
      const tokenHash = uid("hash").padEnd(64, "0").slice(0, 64);
      await ctx.storage.createWaitWebhook({ instanceId: inst.instanceId, run: 1, hookId: "webhook:1", tokenHash, expiresInSeconds: 600 });
      expect(await ctx.storage.fireWaitWebhook(tokenHash, DELIVERY)).toEqual({ kind: "fired", instanceId: inst.instanceId, woken: false });
      const first = await ctx.storage.bindWaitWebhook(inst.instanceId, 1, "webhook:1", "race:1");
      expect(first).toMatchObject({ status: "fired" });
      expect(JSON.parse(first!.payload!)).toMatchObject({ body: "yes" });
      await ctx.storage.appendHistory(inst.instanceId, [{ activityId: "race:1", eventType: "WebhookReceived", data: { type: "json", json: first!.payload! } }]);
      expect(await ctx.storage.bindWaitWebhook(inst.instanceId, 1, "webhook:1", "webhook:1:wait")).toMatchObject({ status: "cancelled", payload: null });
    });

    it("the hook's expiry decides the race it is bound to: WebhookExpired at the race's id, the timer withdrawn, once", async () => {
      const w = await waiting("race:1", "waiting_for_webhook", { timer: true, expiresInSeconds: 0.01 });
      await new Promise((r) => setTimeout(r, 30));
      expect(await ctx.storage.findDueWebhookInstances(1000)).toContain(w.id);
      expect(await ctx.storage.expireWaitWebhooks(1000, w.id)).toEqual([w.id]);
      expect((await ctx.storage.loadHistory(w.id)).map((h) => `${h.activityId} ${h.eventType}`)).toEqual(["race:1 WebhookExpired"]);
      expect(await left(w.id)).toEqual({ timers: 0, waiting: 0 });
      expect(await ctx.storage.expireWaitWebhooks(1000, w.id)).toEqual([]);
      expect(await ctx.storage.fireWaitWebhook(w.tokenHash, DELIVERY)).toEqual({ kind: "gone", reason: "expired" });
    });

    it("a fork's rows: its own token, the original's expiry, the outcome its wait has in the copied prefix", async () => {
      const done = await waiting("webhook:1:wait", "waiting_for_webhook", { expiresInSeconds: 600 });
      await ctx.storage.fireWaitWebhook(done.tokenHash, DELIVERY);
      const open = await waiting("webhook:1:wait", "waiting_for_webhook", { expiresInSeconds: 600 });
      for (const origin of [done, open]) {
        const fork = await newInstance(ctx.storage);
        const prefix = await ctx.storage.loadHistory(origin.id);
        if (prefix.length) await ctx.storage.appendHistory(fork.instanceId, prefix.map((h) => ({ activityId: h.activityId, eventType: h.eventType, data: h.data })));
        const forkHash = uid("fork").padEnd(64, "0").slice(0, 64);
        const [row] = await ctx.storage.forkWaitWebhooks(origin.id, fork.instanceId, [{ hookId: "webhook:1", tokenHash: forkHash }]);
        const [orig] = await ctx.storage.listWaitWebhooks(origin.id, 10);
        expect(row).toMatchObject({ hookId: "webhook:1", status: origin === done ? "fired" : "open" });
        expect(row!.expiresAt!.getTime()).toBe(orig!.expiresAt!.getTime());
        expect(await ctx.storage.fireWaitWebhook(forkHash, DELIVERY)).toMatchObject(origin === done ? { kind: "gone", reason: "fired" } : { kind: "fired", instanceId: fork.instanceId, woken: false });
      }
      expect(await ctx.storage.forkWaitWebhooks(open.id, uid("none"), [])).toEqual([]);
    });
  });
}
