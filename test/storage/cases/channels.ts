// Channels: publish, subscribe modes and conflicts, take (broadcast / competing /
// direct), point-to-point visibility, waits and their timeouts, cleanup; groups.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ChannelModeConflictError } from "../../../src/core/errors.ts";
import type { InstanceRecord, Storage } from "../../../src/storage/types.ts";
import { channelDeliveryCases } from "./channel-delivery.ts";
import { ALL_BYTES, binary, count, json, newInstance, rows, sleep, uid, UNICODE_JSON, type ContractContext } from "./helpers.ts";

async function waitingOn(storage: Storage, channel: string, mode: "broadcast" | "competing" | "direct", timeoutAt: Date | number | null = null): Promise<InstanceRecord> {
  const inst = await newInstance(storage);
  await storage.subscribe(inst.instanceId, channel, mode);
  const lease = (await storage.acquireLease(inst.instanceId, "w", 30))!;
  await storage.transaction(async (tx) => {
    expect(await tx.takeNextMessage(inst.instanceId, channel)).toBeNull();
    await tx.setWaiting(inst.instanceId, channel, `receive_${channel}:1`, timeoutAt);
    expect((await tx.concludeStep(lease.fence, { status: "waiting_for_message", currentActivityId: `receive_${channel}:1` })).ok).toBe(true);
  });
  return inst;
}

export function channelCases(ctx: ContractContext): void {
  describe("channels", () => {
    it("publishes json and binary messages with a generated or given id", async () => {
      const channel = uid("ch");
      const a = await ctx.storage.publishMessage({ channel, data: { type: "json", json: UNICODE_JSON }, metadata: '{"k":"v"}' });
      expect(a.messageId).toMatch(/^[0-9a-f-]{36}$/);
      expect(a).toMatchObject({ channel, data: { type: "json", json: UNICODE_JSON }, metadata: '{"k":"v"}', targetInstanceId: null });
      expect(a.publishedAt).toBeInstanceOf(Date);
      const b = await ctx.storage.publishMessage({ channel, messageId: uid("msg"), data: binary(ALL_BYTES) });
      expect(b.data).toEqual(binary(ALL_BYTES));
      expect(b.seq).toBeGreaterThan(a.seq);
      await expect(ctx.storage.publishMessage({ channel, messageId: b.messageId, data: json(1) })).rejects.toThrow();
    });

    it("subscribes idempotently and rejects mode conflicts", async () => {
      const channel = uid("ch");
      const [a, b, c] = [await newInstance(ctx.storage), await newInstance(ctx.storage), await newInstance(ctx.storage)];
      await ctx.storage.subscribe(a.instanceId, channel, "broadcast");
      await ctx.storage.subscribe(a.instanceId, channel, "broadcast");
      await ctx.storage.subscribe(b.instanceId, channel, "broadcast");
      await expect(ctx.storage.subscribe(c.instanceId, channel, "competing")).rejects.toBeInstanceOf(ChannelModeConflictError);
      await expect(ctx.storage.subscribe(a.instanceId, channel, "competing")).rejects.toBeInstanceOf(ChannelModeConflictError);
      await expect(ctx.storage.subscribe(a.instanceId, channel, "direct")).rejects.toBeInstanceOf(ChannelModeConflictError);
      // direct is per instance: it coexists with another mode on the channel
      await ctx.storage.subscribe(c.instanceId, channel, "direct");
      expect((await ctx.storage.getSubscription(a.instanceId, channel))!.mode).toBe("broadcast");
      expect(await ctx.storage.getSubscription(c.instanceId, uid("none"))).toBeNull();
      expect(await count(ctx.database, sql`SELECT 1 FROM channel_subscriptions WHERE channel = ${channel}`)).toBe(3);

      const queue = uid("q");
      await ctx.storage.subscribe(a.instanceId, queue, "competing");
      await expect(ctx.storage.subscribe(b.instanceId, queue, "broadcast")).rejects.toThrow(/competing/);
      await ctx.storage.unsubscribe(a.instanceId, queue);
      await ctx.storage.subscribe(b.instanceId, queue, "broadcast"); // free again
      expect(await ctx.storage.getSubscription(a.instanceId, queue)).toBeNull();
    });

    it("broadcast: each subscriber gets every later message once, in order, via its cursor", async () => {
      const channel = uid("news");
      const early = await ctx.storage.publishMessage({ channel, data: json("before") });
      const [a, b] = [await newInstance(ctx.storage), await newInstance(ctx.storage)];
      await ctx.storage.subscribe(a.instanceId, channel, "broadcast");
      await ctx.storage.subscribe(b.instanceId, channel, "broadcast");
      expect((await ctx.storage.getSubscription(a.instanceId, channel))!.cursorMessageId).toBe(early.seq);
      expect(await ctx.storage.takeNextMessage(a.instanceId, channel)).toBeNull();
      const m1 = await ctx.storage.publishMessage({ channel, data: json(1) });
      const m2 = await ctx.storage.publishMessage({ channel, data: binary(ALL_BYTES) });
      for (const inst of [a, b]) {
        const got1 = await ctx.storage.takeNextMessage(inst.instanceId, channel);
        const got2 = await ctx.storage.takeNextMessage(inst.instanceId, channel);
        expect(got1).toEqual(m1);
        expect(got2).toEqual(m2);
        expect(await ctx.storage.takeNextMessage(inst.instanceId, channel)).toBeNull();
        expect((await ctx.storage.getSubscription(inst.instanceId, channel))!.cursorMessageId).toBe(m2.seq);
      }
      const cursors = await rows<{ last: unknown }>(ctx.database, sql`SELECT last_delivered_id AS last FROM channel_delivery_cursors WHERE channel = ${channel}`);
      expect(cursors.map((r) => Number(r.last))).toEqual([m2.seq, m2.seq]);
      expect(await ctx.storage.takeNextMessage(uid("stranger"), channel)).toBeNull();
    });

    it("competing: messages published before anyone subscribed are delivered, each to exactly one subscriber", async () => {
      const channel = uid("jobs");
      const published = [];
      for (let i = 0; i < 4; i++) published.push(await ctx.storage.publishMessage({ channel, data: json({ job: i }) }));
      const [a, b] = [await newInstance(ctx.storage), await newInstance(ctx.storage)];
      await ctx.storage.subscribe(a.instanceId, channel, "competing");
      await ctx.storage.subscribe(b.instanceId, channel, "competing");
      const got: string[] = [];
      for (const inst of [a, b, a, b, a, b]) {
        const m = await ctx.storage.takeNextMessage(inst.instanceId, channel);
        if (m) got.push(m.messageId);
      }
      expect(got).toEqual(published.map((m) => m.messageId)); // oldest first, none twice
      const claims = await rows<{ instance_id: string }>(ctx.database, sql`SELECT c.instance_id FROM channel_message_claims c JOIN channel_messages m USING (message_id) WHERE m.channel = ${channel} ORDER BY m.id`);
      expect(claims.map((c) => c.instance_id)).toEqual([a.instanceId, b.instanceId, a.instanceId, b.instanceId]);
      // the cursor is a scan hint past claimed messages; a subscriber whose hint lags still gets only unclaimed ones
      expect((await ctx.storage.getSubscription(b.instanceId, channel))!.cursorMessageId).toBe(published[3]!.seq);
      const c = await newInstance(ctx.storage);
      await ctx.storage.subscribe(c.instanceId, channel, "competing");
      expect(await ctx.storage.takeNextMessage(c.instanceId, channel)).toBeNull();
      const fresh = await ctx.storage.publishMessage({ channel, data: json("fresh") });
      expect((await ctx.storage.takeNextMessage(c.instanceId, channel))?.messageId).toBe(fresh.messageId);
      expect(await ctx.storage.takeNextMessage(a.instanceId, channel)).toBeNull();
    });

    it("point-to-point messages are only ever returned to their target, in every mode", async () => {
      const [target, other] = [await newInstance(ctx.storage), await newInstance(ctx.storage)];
      for (const mode of ["broadcast", "competing"] as const) {
        const channel = uid(mode);
        await ctx.storage.subscribe(target.instanceId, channel, mode);
        await ctx.storage.subscribe(other.instanceId, channel, mode);
        const p2p = await ctx.storage.publishMessage({ channel, data: json("secret"), targetInstanceId: target.instanceId });
        const shared = await ctx.storage.publishMessage({ channel, data: json("public") });
        const otherGot = await ctx.storage.takeNextMessage(other.instanceId, channel);
        expect(otherGot?.messageId).toBe(shared.messageId);
        expect(await ctx.storage.takeNextMessage(other.instanceId, channel)).toBeNull();
        expect((await ctx.storage.takeNextMessage(target.instanceId, channel))?.messageId).toBe(p2p.messageId);
        expect((await ctx.storage.findWaitingSubscribersWithMessages(1000, channel)).map((s) => s.instanceId)).not.toContain(other.instanceId);
      }
    });

    it("direct: messages targeted at the instance, including ones sent before it subscribed, once each", async () => {
      const channel = uid("inbox");
      const [me, peer] = [await newInstance(ctx.storage), await newInstance(ctx.storage)];
      const early = await ctx.storage.publishMessage({ channel, data: json("early"), targetInstanceId: me.instanceId });
      await ctx.storage.publishMessage({ channel, data: json("untargeted") });
      await ctx.storage.publishMessage({ channel, data: json("for peer"), targetInstanceId: peer.instanceId });
      await ctx.storage.subscribe(me.instanceId, channel, "direct");
      await ctx.storage.subscribe(peer.instanceId, channel, "direct");
      expect((await ctx.storage.takeNextMessage(me.instanceId, channel))?.messageId).toBe(early.messageId);
      expect(await ctx.storage.takeNextMessage(me.instanceId, channel)).toBeNull();
      const late = await ctx.storage.publishMessage({ channel, data: json("late"), targetInstanceId: me.instanceId });
      expect((await ctx.storage.takeNextMessage(me.instanceId, channel))?.messageId).toBe(late.messageId);
      expect((await ctx.storage.takeNextMessage(peer.instanceId, channel))?.data).toEqual(json("for peer"));
      expect(await ctx.storage.takeNextMessage(peer.instanceId, channel)).toBeNull();
    });

    it("finds waiting subscribers that have a message available, per mode, and clearWaiting makes them runnable", async () => {
      const channel = uid("events");
      const bcast = await waitingOn(ctx.storage, channel, "broadcast");
      const queue = uid("queue");
      const worker = await waitingOn(ctx.storage, queue, "competing");
      const idle = await newInstance(ctx.storage); // subscribed but not waiting
      await ctx.storage.subscribe(idle.instanceId, channel, "broadcast");
      expect((await ctx.storage.getInstance(bcast.instanceId))!.status).toBe("waiting_for_message");

      const none = await ctx.storage.findWaitingSubscribersWithMessages(1000);
      expect(none.map((s) => s.instanceId)).not.toContain(bcast.instanceId);
      expect(none.map((s) => s.instanceId)).not.toContain(worker.instanceId);

      await ctx.storage.publishMessage({ channel, data: json("hello") });
      await ctx.storage.publishMessage({ channel: queue, data: json("job") });
      const found = await ctx.storage.findWaitingSubscribersWithMessages(1000);
      expect(found).toEqual(
        expect.arrayContaining([
          { instanceId: bcast.instanceId, channel, mode: "broadcast", activityId: `receive_${channel}:1` },
          { instanceId: worker.instanceId, channel: queue, mode: "competing", activityId: `receive_${queue}:1` },
        ]),
      );
      expect(found.map((s) => s.instanceId)).not.toContain(idle.instanceId);
      expect((await ctx.storage.findWaitingSubscribersWithMessages(1000, queue)).map((s) => s.instanceId)).toEqual([worker.instanceId]);

      // deliver to the competing worker the way the engine does: take, record, clear
      await ctx.storage.transaction(async (tx) => {
        const msg = (await tx.takeNextMessage(worker.instanceId, queue))!;
        await tx.appendHistory(worker.instanceId, [{ activityId: `receive_${queue}:1`, eventType: "ChannelMessageReceived", data: msg.data }]);
        await tx.clearWaiting(worker.instanceId, queue);
      });
      expect((await ctx.storage.getInstance(worker.instanceId))!.status).toBe("running");
      expect((await ctx.storage.getSubscription(worker.instanceId, queue))!).toMatchObject({ activityId: null, timeoutAt: null });
      expect((await ctx.storage.findWaitingSubscribersWithMessages(1000, queue)).map((s) => s.instanceId)).toEqual([]);

      // lockWaitingSubscription: only while still waiting on that very activity id
      await ctx.storage.transaction(async (tx) => {
        expect(await tx.lockWaitingSubscription(bcast.instanceId, channel, `receive_${channel}:1`)).toBe(true);
        expect(await tx.lockWaitingSubscription(bcast.instanceId, channel, "receive_other:1")).toBe(false);
        expect(await tx.lockWaitingSubscription(worker.instanceId, queue, `receive_${queue}:1`)).toBe(false); // cleared
      });

      // clearWaiting on a subscription that is not waiting does not wake the instance
      await ctx.storage.clearWaiting(bcast.instanceId, uid("other"));
      expect((await ctx.storage.getInstance(bcast.instanceId))!.status).toBe("waiting_for_message");
      await expect(ctx.storage.setWaiting(idle.instanceId, uid("unsubscribed"), "r:1", null)).rejects.toThrow(/not subscribed/);
    });

    it("expires waits whose timeout passed: MessageTimeout at the wait's activity id, wait cleared, runnable", async () => {
      const channel = uid("slow");
      const expired = await waitingOn(ctx.storage, channel, "competing", new Date(Date.now() - 1000));
      const pending = await waitingOn(ctx.storage, channel, "competing", new Date(Date.now() + 3600_000));
      // a timeout given in seconds counts from the database's clock
      const bySeconds = await waitingOn(ctx.storage, channel, "competing", 0.2);
      const notYet = await waitingOn(ctx.storage, channel, "competing", 3600);
      await sleep(300);
      const ids = await ctx.storage.expireMessageWaits(1000);
      expect(ids).toContain(bySeconds.instanceId);
      expect(ids).not.toContain(notYet.instanceId);
      expect(ids).toContain(expired.instanceId);
      expect(ids).not.toContain(pending.instanceId);
      const [event] = await ctx.storage.loadHistory(expired.instanceId);
      expect(event).toMatchObject({ activityId: `receive_${channel}:1`, eventType: "MessageTimeout" });
      expect(JSON.parse(event!.data.type === "json" ? event!.data.json : "{}")).toMatchObject({ channel });
      expect((await ctx.storage.getInstance(expired.instanceId))!.status).toBe("running");
      expect((await ctx.storage.getSubscription(expired.instanceId, channel))!).toMatchObject({ activityId: null, timeoutAt: null });
      expect((await ctx.storage.getInstance(pending.instanceId))!.status).toBe("waiting_for_message");
      expect((await ctx.storage.getSubscription(pending.instanceId, channel))!.timeoutAt).toBeInstanceOf(Date);
      expect(await ctx.storage.expireMessageWaits(1000)).not.toContain(expired.instanceId);
    });

    it("cleans up old messages but keeps recent ones and old ones claimed recently (claims of recent messages are never deleted)", async () => {
      const channel = uid("retention");
      const [a, b] = [await newInstance(ctx.storage), await newInstance(ctx.storage)];
      await ctx.storage.subscribe(a.instanceId, channel, "competing");
      await ctx.storage.subscribe(b.instanceId, channel, "competing");
      const oldClaimedEarly = await ctx.storage.publishMessage({ channel, data: json("old, claimed early") });
      expect((await ctx.storage.takeNextMessage(a.instanceId, channel))?.messageId).toBe(oldClaimedEarly.messageId);
      const oldClaimedLate = await ctx.storage.publishMessage({ channel, data: json("old, claimed late") });
      const oldUnclaimed = await ctx.storage.publishMessage({ channel: uid("other"), data: json("old, unclaimed") });
      await sleep(700);
      expect((await ctx.storage.takeNextMessage(b.instanceId, channel))?.messageId).toBe(oldClaimedLate.messageId);
      const recent = await ctx.storage.publishMessage({ channel, data: json("recent") });
      expect((await ctx.storage.takeNextMessage(a.instanceId, channel))?.messageId).toBe(recent.messageId);

      const deleted = await ctx.storage.cleanupChannelMessages(0.5, 10_000);
      expect(deleted).toBeGreaterThanOrEqual(2);
      const left = await rows<{ message_id: string }>(ctx.database, sql`SELECT message_id FROM channel_messages WHERE message_id IN (${oldClaimedEarly.messageId}, ${oldClaimedLate.messageId}, ${oldUnclaimed.messageId}, ${recent.messageId})`);
      expect(left.map((r) => r.message_id).sort()).toEqual([oldClaimedLate.messageId, recent.messageId].sort());
      const claims = await rows<{ message_id: string }>(ctx.database, sql`SELECT message_id FROM channel_message_claims WHERE message_id IN (${oldClaimedEarly.messageId}, ${oldClaimedLate.messageId}, ${recent.messageId})`);
      expect(claims.map((r) => r.message_id).sort()).toEqual([oldClaimedLate.messageId, recent.messageId].sort());
      // a later subscriber of the queue never gets an already-claimed message back
      expect(await ctx.storage.takeNextMessage(b.instanceId, channel)).toBeNull();
    });
  });

  channelDeliveryCases(ctx);

  describe("groups", () => {
    it("joins idempotently, lists members in join order, leaves", async () => {
      const group = uid("g");
      const [a, b] = [await newInstance(ctx.storage), await newInstance(ctx.storage)];
      await ctx.storage.joinGroup(a.instanceId, group);
      await ctx.storage.joinGroup(b.instanceId, group);
      await ctx.storage.joinGroup(a.instanceId, group);
      expect(await ctx.storage.groupMembers(group)).toEqual([a.instanceId, b.instanceId]);
      await ctx.storage.leaveGroup(a.instanceId, group);
      await ctx.storage.leaveGroup(a.instanceId, group);
      expect(await ctx.storage.groupMembers(group)).toEqual([b.instanceId]);
      expect(await ctx.storage.groupMembers(uid("empty"))).toEqual([]);
    });
  });
}
