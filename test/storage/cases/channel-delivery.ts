// Batched broadcast delivery (deliverBroadcast): every waiting broadcast
// subscriber gets its next message in order, recorded at its wait's activity
// id, wait cleared, instance runnable; bounded per call; leaves competing and
// direct subscribers, point-to-point mail and rows another transaction holds
// to the per-subscriber path.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createStorage } from "../../../src/storage/pg-storage.ts";
import type { ChannelMessageRecord, InstanceRecord, Payload, Storage } from "../../../src/storage/types.ts";
import { ALL_BYTES, binary, json, newInstance, openMany, rows, uid, type ContractContext } from "./helpers.ts";

async function waitingOn(storage: Storage, channel: string, mode: "broadcast" | "competing" | "direct"): Promise<InstanceRecord> {
  const inst = await newInstance(storage);
  await storage.subscribe(inst.instanceId, channel, mode);
  const lease = (await storage.acquireLease(inst.instanceId, "w", 30))!;
  await storage.transaction(async (tx) => {
    expect(await tx.takeNextMessage(inst.instanceId, channel)).toBeNull();
    await tx.setWaiting(inst.instanceId, channel, `receive_${channel}:1`, new Date(Date.now() + 3600_000));
    expect((await tx.concludeStep(lease.fence, { status: "waiting_for_message", currentActivityId: `receive_${channel}:1` })).ok).toBe(true);
  });
  return inst;
}

/** Records the message id and data as the payload, so a test can see which message landed where. */
const record = (msg: ChannelMessageRecord): { eventType: string; data: Payload } => ({
  eventType: "MessageReceived",
  data: msg.data.type === "binary" ? msg.data : json({ messageId: msg.messageId, data: JSON.parse(msg.data.json) as unknown }),
});

export function channelDeliveryCases(ctx: ContractContext): void {
  describe("batched broadcast delivery", () => {
    it("delivers the next message to every waiting broadcast subscriber, in order, exactly at its wait", async () => {
      const channel = uid("fan");
      const subs = [await waitingOn(ctx.storage, channel, "broadcast"), await waitingOn(ctx.storage, channel, "broadcast"), await waitingOn(ctx.storage, channel, "broadcast")];
      const idle = await newInstance(ctx.storage); // subscribed, not waiting: untouched
      await ctx.storage.subscribe(idle.instanceId, channel, "broadcast");
      expect(await ctx.storage.deliverBroadcast(channel, 100, record)).toEqual([]); // nothing published yet

      const m1 = await ctx.storage.publishMessage({ channel, data: json("first") });
      const m2 = await ctx.storage.publishMessage({ channel, data: json("second") });
      const got = await ctx.storage.deliverBroadcast(channel, 100, record);
      expect(got.map((d) => d.instanceId).sort()).toEqual(subs.map((s) => s.instanceId).sort());
      expect(got.every((d) => d.seq === m1.seq && d.activityId === `receive_${channel}:1`)).toBe(true);

      for (const s of subs) {
        const history = await ctx.storage.loadHistory(s.instanceId);
        expect(history.map((h) => [h.activityId, h.eventType])).toEqual([[`receive_${channel}:1`, "MessageReceived"]]);
        expect(JSON.parse(history[0]!.data.type === "json" ? history[0]!.data.json : "null")).toEqual({ messageId: m1.messageId, data: "first" });
        expect((await ctx.storage.getInstance(s.instanceId))!.status).toBe("running");
        expect(await ctx.storage.getSubscription(s.instanceId, channel)).toMatchObject({ activityId: null, timeoutAt: null, cursorMessageId: m1.seq });
        // in order: the next take is the second message, then nothing
        expect((await ctx.storage.takeNextMessage(s.instanceId, channel))?.messageId).toBe(m2.messageId);
        expect(await ctx.storage.takeNextMessage(s.instanceId, channel)).toBeNull();
      }
      const mirror = await rows<{ last: unknown }>(ctx.database, sql`SELECT last_delivered_id AS last FROM channel_delivery_cursors WHERE channel = ${channel}`);
      expect(mirror.map((r) => Number(r.last))).toEqual([m2.seq, m2.seq, m2.seq]);
      expect((await ctx.storage.getSubscription(idle.instanceId, channel))!.cursorMessageId).toBe(0);
      expect(await ctx.storage.deliverBroadcast(channel, 100, record)).toEqual([]); // nobody waits any more
    });

    it("takes at most `limit` subscribers per call, oldest subscription first, and records binary payloads as binary", async () => {
      const channel = uid("fan");
      const subs: InstanceRecord[] = [];
      for (let i = 0; i < 3; i++) subs.push(await waitingOn(ctx.storage, channel, "broadcast"));
      await ctx.storage.publishMessage({ channel, data: binary(ALL_BYTES) });
      const first = await ctx.storage.deliverBroadcast(channel, 2, record);
      expect(first.map((d) => d.instanceId)).toEqual([subs[0]!.instanceId, subs[1]!.instanceId]);
      expect((await ctx.storage.getInstance(subs[2]!.instanceId))!.status).toBe("waiting_for_message");
      expect((await ctx.storage.deliverBroadcast(channel, 2, record)).map((d) => d.instanceId)).toEqual([subs[2]!.instanceId]);
      const [event] = await ctx.storage.loadHistory(subs[2]!.instanceId);
      expect(event!.data).toEqual(binary(ALL_BYTES));
    });

    it("leaves competing and direct subscribers, and a broadcast subscriber with point-to-point mail, to the per-subscriber path", async () => {
      const queue = uid("queue");
      const worker = await waitingOn(ctx.storage, queue, "competing");
      await ctx.storage.publishMessage({ channel: queue, data: json("job") });
      expect(await ctx.storage.deliverBroadcast(queue, 100, record)).toEqual([]);
      expect((await ctx.storage.takeNextMessage(worker.instanceId, queue))?.data).toEqual(json("job")); // still unclaimed

      const channel = uid("fan");
      const [mailed, plain] = [await waitingOn(ctx.storage, channel, "broadcast"), await waitingOn(ctx.storage, channel, "broadcast")];
      const inbox = await waitingOn(ctx.storage, channel, "direct");
      const p2p = await ctx.storage.publishMessage({ channel, data: json("for you"), targetInstanceId: mailed.instanceId });
      await ctx.storage.publishMessage({ channel, data: json("for all") });
      expect((await ctx.storage.deliverBroadcast(channel, 100, record)).map((d) => d.instanceId)).toEqual([plain.instanceId]);
      expect((await ctx.storage.getInstance(mailed.instanceId))!.status).toBe("waiting_for_message");
      expect((await ctx.storage.getInstance(inbox.instanceId))!.status).toBe("waiting_for_message");
      // the per-subscriber path then takes the point-to-point message first
      expect((await ctx.storage.takeNextMessage(mailed.instanceId, channel))?.messageId).toBe(p2p.messageId);
    });

    it("skips a subscriber whose wait another transaction holds (a racing delivery, cancel or timeout), never both win", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const channel = uid("fan");
      const [held, free] = [await waitingOn(ctx.storage, channel, "broadcast"), await waitingOn(ctx.storage, channel, "broadcast")];
      await ctx.storage.publishMessage({ channel, data: json("news") });
      const many = await openMany(ctx, 1);
      try {
        const other = createStorage(many.databases[0]!);
        await ctx.storage.transaction(async (tx) => {
          // a cancel holds the instance and its subscription (a delivery would also hold the channel lock, and be waited for)
          expect((await tx.cancelInstance(held.instanceId, "test"))?.ok).toBe(true);
          // another connection batches while the wait is held: it skips it instead of waiting or delivering twice
          expect((await other.deliverBroadcast(channel, 100, record)).map((d) => d.instanceId)).toEqual([free.instanceId]);
        });
        expect(await other.deliverBroadcast(channel, 100, record)).toEqual([]);
      } finally {
        await many.close();
      }
      expect(await ctx.storage.loadHistory(held.instanceId)).toEqual([]);
      expect((await ctx.storage.loadHistory(free.instanceId)).map((h) => h.eventType)).toEqual(["MessageReceived"]);
    });
  });
}
