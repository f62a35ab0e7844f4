// Races between separate connections (drivers with `concurrent`): exactly one
// lease winner, exactly one competing claimer, one system-lock winner, and
// sweepers that never hand out the same row twice.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStorage } from "../../../src/storage/pg-storage.ts";
import type { Storage } from "../../../src/storage/types.ts";
import { count, json, newInstance, openMany, sleep, uid, type ContractContext } from "./helpers.ts";

const WORKERS = 8;

export function concurrencyCases(ctx: ContractContext): void {
  describe("concurrency (separate connections)", () => {
    let storages: Storage[] = [];
    let close: (() => Promise<void>) | undefined;

    beforeAll(async () => {
      if (!ctx.database.concurrent) return;
      const many = await openMany(ctx, WORKERS);
      storages = many.databases.map(createStorage);
      close = many.close;
    });
    afterAll(async () => {
      await close?.();
    });

    it("lets exactly one of several workers win a lease race", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      for (let round = 0; round < 5; round++) {
        const inst = await newInstance(ctx.storage);
        const results = await Promise.all(storages.map((s, i) => s.acquireLease(inst.instanceId, `worker-${i}`, 30, { withHistory: true })));
        const winners = results.filter((r) => r !== null);
        expect(winners).toHaveLength(1);
        expect(winners[0]!.fence.token).toBe(1);
        expect((await ctx.storage.getInstance(inst.instanceId))!.lockedBy).toBe(winners[0]!.fence.workerId);
      }
    });

    it("lets exactly one worker take over an expired lease", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const inst = await newInstance(ctx.storage);
      const old = (await ctx.storage.acquireLease(inst.instanceId, "old", 0.2))!;
      await sleep(300);
      const results = await Promise.all(storages.map((s, i) => s.acquireLease(inst.instanceId, `worker-${i}`, 30)));
      expect(results.filter((r) => r !== null)).toHaveLength(1);
      expect((await ctx.storage.concludeStep(old.fence, { status: "completed" })).ok).toBe(false);
    });

    it("gives a competing message to exactly one of several concurrent claimers", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      for (let round = 0; round < 3; round++) {
        const channel = uid("race");
        const subscribers: string[] = [];
        for (let i = 0; i < WORKERS; i++) {
          const inst = await newInstance(ctx.storage);
          await ctx.storage.subscribe(inst.instanceId, channel, "competing");
          subscribers.push(inst.instanceId);
        }
        const msg = await ctx.storage.publishMessage({ channel, data: json("only one") });
        const got = await Promise.all(storages.map((s, i) => s.takeNextMessage(subscribers[i]!, channel)));
        const winners = got.filter((m) => m !== null);
        expect(winners).toHaveLength(1);
        expect(winners[0]!.messageId).toBe(msg.messageId);
      }
    });

    it("drains a competing queue with concurrent claimers: every message exactly once", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const channel = uid("drain");
      const subscribers: string[] = [];
      for (let i = 0; i < WORKERS; i++) {
        const inst = await newInstance(ctx.storage);
        await ctx.storage.subscribe(inst.instanceId, channel, "competing");
        subscribers.push(inst.instanceId);
      }
      const published = new Set<string>();
      for (let i = 0; i < 40; i++) published.add((await ctx.storage.publishMessage({ channel, data: json(i) })).messageId);
      const taken = await Promise.all(
        storages.map(async (s, i) => {
          const mine: string[] = [];
          for (let m = await s.takeNextMessage(subscribers[i]!, channel); m; m = await s.takeNextMessage(subscribers[i]!, channel)) mine.push(m.messageId);
          return mine;
        }),
      );
      const all = taken.flat();
      expect(all).toHaveLength(published.size);
      expect(new Set(all)).toEqual(published);
    });

    it("a broadcast cursor never skips a message whose publisher committed late", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const channel = uid("order");
      const reader = await newInstance(ctx.storage);
      await ctx.storage.subscribe(reader.instanceId, channel, "broadcast");
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      // Publisher 1 takes its id first but commits late; publisher 2 and the reader must not overtake it.
      const slow = storages[0]!.transaction(async (tx) => {
        await tx.publishMessage({ channel, data: json("first") });
        await gate;
      });
      await sleep(100);
      const fast = storages[1]!.publishMessage({ channel, data: json("second") });
      const read = storages[2]!.takeNextMessage(reader.instanceId, channel);
      await sleep(200);
      release();
      await Promise.all([slow, fast]);
      const first = await read;
      const second = await ctx.storage.takeNextMessage(reader.instanceId, channel);
      expect([first?.data, second?.data]).toEqual([json("first"), json("second")]);
    });

    it("lets one of several racers take a system lock; only the holder renews; another takes it over after expiry", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const name = uid("sweep");
      const won = await Promise.all(storages.map((s, i) => s.tryAcquireSystemLock(name, `holder-${i}`, 0.3)));
      expect(won.filter(Boolean)).toHaveLength(1);
      const winner = won.indexOf(true);
      const loser = (winner + 1) % storages.length;
      expect(await storages[winner]!.renewSystemLock(name, `holder-${winner}`, 0.3)).toBe(true);
      expect(await storages[loser]!.renewSystemLock(name, `holder-${loser}`, 0.3)).toBe(false);
      await sleep(450);
      const takeover = await Promise.all(storages.map((s, i) => (i === winner ? Promise.resolve(false) : s.tryAcquireSystemLock(name, `holder-${i}`, 30))));
      expect(takeover.filter(Boolean)).toHaveLength(1);
      expect(await storages[winner]!.renewSystemLock(name, `holder-${winner}`, 30)).toBe(false);
    });

    it("concurrent fireExpiredTimers calls never fire the same timer twice", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const ids: string[] = [];
      for (let i = 0; i < 60; i++) {
        const inst = await newInstance(ctx.storage);
        const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
        await ctx.storage.concludeStep(lease.fence, { status: "waiting_for_timer", timer: { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: 0 } });
        ids.push(inst.instanceId);
      }
      const fired = await Promise.all(
        storages.slice(0, 4).map(async (s) => {
          const mine: string[] = [];
          for (let batch = await s.fireExpiredTimers(5); batch.length; batch = await s.fireExpiredTimers(5)) mine.push(...batch);
          return mine;
        }),
      );
      const mine = fired.flat().filter((id) => ids.includes(id));
      expect(mine).toHaveLength(ids.length);
      expect(new Set(mine).size).toBe(ids.length);
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_history WHERE event_type = 'TimerExpired' AND instance_id IN (${sql.join(ids.map((i) => sql`${i}`), sql`, `)})`)).toBe(ids.length);
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_instances WHERE status = 'running' AND instance_id IN (${sql.join(ids.map((i) => sql`${i}`), sql`, `)})`)).toBe(ids.length);
    });

    it("concurrent claimOutboxEvents calls never return the same row", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const prefix = uid("relay");
      for (let i = 0; i < 60; i++) await ctx.storage.addOutboxEvent({ eventId: `${prefix}-${i}`, eventType: "t", eventSource: "/s", data: json(i) });
      const claimed = await Promise.all(
        storages.slice(0, 4).map(async (s) => {
          const mine: string[] = [];
          for (let batch = await s.claimOutboxEvents(5); batch.length; batch = await s.claimOutboxEvents(5)) mine.push(...batch.map((e) => e.eventId));
          return mine;
        }),
      );
      const mine = claimed.flat().filter((id) => id.startsWith(prefix));
      expect(mine).toHaveLength(60);
      expect(new Set(mine).size).toBe(60);
    });

    it("a delivery holding the waiting subscription and a timeout sweep never both win", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const channel = uid("deadline");
      const inst = await newInstance(ctx.storage);
      await ctx.storage.subscribe(inst.instanceId, channel, "competing");
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      await ctx.storage.setWaiting(inst.instanceId, channel, "receive:1", new Date(Date.now() - 1000));
      await ctx.storage.concludeStep(lease.fence, { status: "waiting_for_message" });
      await ctx.storage.publishMessage({ channel, data: json("just in time") });

      await storages[0]!.transaction(async (tx) => {
        expect(await tx.lockWaitingSubscription(inst.instanceId, channel, "receive:1")).toBe(true);
        // the sweeper on another connection skips the locked wait instead of timing it out
        expect(await storages[1]!.expireMessageWaits(1000)).not.toContain(inst.instanceId);
        const msg = (await tx.takeNextMessage(inst.instanceId, channel))!;
        await tx.appendHistory(inst.instanceId, [{ activityId: "receive:1", eventType: "ChannelMessageReceived", data: msg.data }]);
        await tx.clearWaiting(inst.instanceId, channel);
      });
      expect(await storages[1]!.expireMessageWaits(1000)).not.toContain(inst.instanceId);
      expect((await ctx.storage.loadHistory(inst.instanceId)).map((h) => h.eventType)).toEqual(["ChannelMessageReceived"]);
      expect((await ctx.storage.getInstance(inst.instanceId))!.status).toBe("running");
    });

    it("concurrent expireMessageWaits and releaseStaleLeases calls never process the same row twice", async ({ skip }) => {
      if (!ctx.database.concurrent) skip("driver runs one connection");
      const channel = uid("timeouts");
      const waits: string[] = [];
      const stale: string[] = [];
      for (let i = 0; i < 20; i++) {
        const inst = await newInstance(ctx.storage);
        await ctx.storage.subscribe(inst.instanceId, channel, "competing");
        const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
        await ctx.storage.setWaiting(inst.instanceId, channel, "receive:1", new Date(Date.now() - 1000));
        await ctx.storage.concludeStep(lease.fence, { status: "waiting_for_message" });
        waits.push(inst.instanceId);
        const held = await newInstance(ctx.storage);
        await ctx.storage.acquireLease(held.instanceId, "w", 0.1);
        stale.push(held.instanceId);
      }
      await sleep(200);
      const drain = (fn: (s: Storage) => Promise<string[]>) =>
        Promise.all(
          storages.slice(0, 4).map(async (s) => {
            const mine: string[] = [];
            for (let batch = await fn(s); batch.length; batch = await fn(s)) mine.push(...batch);
            return mine;
          }),
        );
      const [expired, released] = await Promise.all([drain((s) => s.expireMessageWaits(3)), drain((s) => s.releaseStaleLeases(3))]);
      const e = expired.flat().filter((id) => waits.includes(id));
      const r = released.flat().filter((id) => stale.includes(id));
      expect(e.sort()).toEqual([...waits].sort());
      expect(r.sort()).toEqual([...stale].sort());
    });
  });
}
