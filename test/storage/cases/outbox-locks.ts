// Outbox life cycle and system locks.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ALL_BYTES, binary, json, rows, sleep, uid, UNICODE_JSON, type ContractContext } from "./helpers.ts";

export function outboxAndLockCases(ctx: ContractContext): void {
  describe("outbox", () => {
    it("claims due rows once (processing), with exact payloads, optionally only given ids", async () => {
      const prefix = uid("evt");
      const ids = [`${prefix}-1`, `${prefix}-2`, `${prefix}-3`];
      await ctx.storage.addOutboxEvent({ eventId: ids[0]!, eventType: "order.created", eventSource: "/orders", data: { type: "json", json: UNICODE_JSON }, extensions: '{"tenant":"t1"}' });
      await ctx.storage.addOutboxEvent({ eventId: ids[1]!, eventType: "blob", eventSource: "/blobs", data: binary(ALL_BYTES), contentType: "application/octet-stream" });
      await ctx.storage.addOutboxEvent({ eventId: ids[2]!, eventType: "x", eventSource: "/x", data: json(3) });
      await ctx.storage.addOutboxEvent({ eventId: ids[2]!, eventType: "dup", eventSource: "/x", data: json("dup") }); // idempotent

      expect(await ctx.storage.claimOutboxEvents(10, [])).toEqual([]);
      const picked = await ctx.storage.claimOutboxEvents(10, [ids[1]!]);
      expect(picked.map((e) => e.eventId)).toEqual([ids[1]]);
      expect(picked[0]).toMatchObject({ status: "processing", data: binary(ALL_BYTES), contentType: "application/octet-stream", extensions: null, retryCount: 0, publishedAt: null, lastError: null });

      const claimed = (await ctx.storage.claimOutboxEvents(1000)).filter((e) => e.eventId.startsWith(prefix));
      expect(claimed.map((e) => e.eventId)).toEqual([ids[0], ids[2]]);
      expect(claimed[0]).toMatchObject({ eventType: "order.created", eventSource: "/orders", data: { type: "json", json: UNICODE_JSON }, contentType: "application/json", extensions: '{"tenant":"t1"}' });
      expect(claimed[1]!.data).toEqual(json(3));
      expect((await ctx.storage.claimOutboxEvents(1000)).filter((e) => e.eventId.startsWith(prefix))).toEqual([]);
    });

    it("publishes, invalidates, and retries failed rows after their backoff", async () => {
      const prefix = uid("evt");
      for (const n of [1, 2, 3]) await ctx.storage.addOutboxEvent({ eventId: `${prefix}-${n}`, eventType: "t", eventSource: "/s", data: json(n) });
      const mine = async () => (await ctx.storage.claimOutboxEvents(1000)).filter((e) => e.eventId.startsWith(prefix)).map((e) => e.eventId);
      expect(await mine()).toHaveLength(3);
      await ctx.storage.markOutboxPublished(`${prefix}-1`);
      await ctx.storage.markOutboxInvalid(`${prefix}-2`, "400 Bad Request");
      await ctx.storage.markOutboxFailed(`${prefix}-3`, "503", 3600);
      const status = async () =>
        Object.fromEntries(
          (await rows<{ event_id: string; status: string; retry_count: number; last_error: string | null; published: boolean }>(
            ctx.database,
            sql`SELECT event_id, status, retry_count, last_error, published_at IS NOT NULL AS published FROM outbox_events WHERE event_id LIKE ${prefix + "%"}`,
          )).map((r) => [r.event_id, [r.status, Number(r.retry_count), r.last_error, r.published]]),
        );
      expect(await status()).toEqual({
        [`${prefix}-1`]: ["published", 0, null, true],
        [`${prefix}-2`]: ["invalid", 0, "400 Bad Request", false],
        [`${prefix}-3`]: ["failed", 1, "503", false],
      });
      expect(await mine()).toEqual([]); // backoff not over yet

      // a mark for a row that is no longer processing changes nothing
      await ctx.storage.markOutboxFailed(`${prefix}-1`, "late", 0);
      await ctx.storage.markOutboxInvalid(`${prefix}-3`, "late");
      expect((await status())[`${prefix}-1`]).toEqual(["published", 0, null, true]);
      expect((await status())[`${prefix}-3`]).toEqual(["failed", 1, "503", false]);

      await ctx.database.db.execute(sql`UPDATE outbox_events SET next_attempt_at = now() - interval '1 second' WHERE event_id = ${`${prefix}-3`}`);
      expect(await mine()).toEqual([`${prefix}-3`]);
      await ctx.storage.markOutboxFailed(`${prefix}-3`, "503 again", 0);
      expect(await mine()).toEqual([`${prefix}-3`]);
      await ctx.storage.markOutboxPublished(`${prefix}-3`);
      expect((await status())[`${prefix}-3`]).toEqual(["published", 2, null, true]);
    });

    it("lets another relay re-claim a row whose claim timed out (crashed relay)", async () => {
      const id = uid("evt");
      await ctx.storage.addOutboxEvent({ eventId: id, eventType: "t", eventSource: "/s", data: json(1) });
      expect((await ctx.storage.claimOutboxEvents(1000, [id])).map((e) => e.eventId)).toEqual([id]);
      expect(await ctx.storage.claimOutboxEvents(1000, [id])).toEqual([]);
      // simulate the claim timeout passing
      await ctx.database.db.execute(sql`UPDATE outbox_events SET next_attempt_at = now() - interval '1 second' WHERE event_id = ${id}`);
      expect((await ctx.storage.claimOutboxEvents(1000, [id])).map((e) => e.eventId)).toEqual([id]);
    });

    it("expires pending/failed rows that are too old or retried too often", async () => {
      const prefix = uid("evt");
      for (const n of [1, 2, 3, 4]) await ctx.storage.addOutboxEvent({ eventId: `${prefix}-${n}`, eventType: "t", eventSource: "/s", data: json(n) });
      await ctx.database.db.execute(sql`UPDATE outbox_events SET created_at = now() - interval '2 days' WHERE event_id = ${`${prefix}-1`}`);
      await ctx.database.db.execute(sql`UPDATE outbox_events SET status = 'failed', retry_count = 5 WHERE event_id = ${`${prefix}-2`}`);
      await ctx.database.db.execute(sql`UPDATE outbox_events SET status = 'published', created_at = now() - interval '2 days' WHERE event_id = ${`${prefix}-3`}`);
      const n = await ctx.storage.expireOutboxEvents(24 * 3600, 5);
      expect(n).toBeGreaterThanOrEqual(2);
      const statuses = await rows<{ event_id: string; status: string }>(ctx.database, sql`SELECT event_id, status FROM outbox_events WHERE event_id LIKE ${prefix + "%"} ORDER BY event_id`);
      expect(statuses.map((r) => r.status)).toEqual(["expired", "expired", "published", "pending"]);
    });
    it("dead letters: listed newest first with a cursor, re-armed (age from the re-arm) or discarded only while dead", async () => {
      const prefix = uid("dead");
      const ids = [1, 2, 3].map((n) => `${prefix}-${n}`);
      for (const id of ids) await ctx.storage.addOutboxEvent({ eventId: id, eventType: prefix, eventSource: "/s", data: json(id) });
      await ctx.storage.claimOutboxEvents(1000, ids);
      await ctx.storage.markOutboxInvalid(ids[0]!, "400 Bad Request");
      await ctx.storage.markOutboxInvalid(ids[1]!, "400 again");
      await ctx.database.db.execute(sql`UPDATE outbox_events SET status = 'expired', retry_count = 5, created_at = now() - interval '2 days' WHERE event_id = ${ids[2]!}`);
      const first = await ctx.storage.listDeadLetters({ eventType: prefix, limit: 2 });
      expect(first.events.map((e) => e.eventId)).toEqual([ids[1], ids[0]]);
      expect(first.events[0]).toMatchObject({ status: "invalid", lastError: "400 again", rearmedAt: null, data: json(ids[1]) });
      const second = await ctx.storage.listDeadLetters({ eventType: prefix, limit: 2, cursor: first.nextCursor });
      expect(second.events.map((e) => e.eventId)).toEqual([ids[2]]);
      expect(second.nextCursor).toBeNull();
      expect((await ctx.storage.listDeadLetters({ eventType: prefix, status: ["invalid"] })).events).toHaveLength(2);
      await expect(ctx.storage.listDeadLetters({ cursor: "nope" })).rejects.toMatchObject({ name: "InvalidArgumentError" });

      expect(await ctx.storage.rearmOutboxEvent(ids[2]!)).toEqual({ previousStatus: "expired", done: true });
      expect(await ctx.storage.rearmOutboxEvent(ids[2]!)).toEqual({ previousStatus: "pending", done: false });
      expect(await ctx.storage.rearmOutboxEvent(uid("none"))).toEqual({ previousStatus: null, done: false });
      // two days old, but its age counts from the re-arm: not expired again by age, due now
      await ctx.storage.expireOutboxEvents(24 * 3600, 5);
      const [rearmed] = await ctx.storage.claimOutboxEvents(10, [ids[2]!]);
      expect(rearmed).toMatchObject({ status: "processing", retryCount: 0 });
      expect(rearmed!.rearmedAt).toBeInstanceOf(Date);

      expect(await ctx.storage.discardOutboxEvent(ids[2]!)).toEqual({ previousStatus: "processing", done: false });
      expect(await ctx.storage.discardOutboxEvent(ids[0]!)).toEqual({ previousStatus: "invalid", done: true });
      expect(await ctx.storage.discardOutboxEvent(ids[0]!)).toEqual({ previousStatus: null, done: false });
      expect((await ctx.storage.listDeadLetters({ eventType: prefix })).events.map((e) => e.eventId)).toEqual([ids[1]]);
    });
  });

  describe("system locks", () => {
    it("is held by one holder, re-acquirable and renewable by it, released only by it", async () => {
      const name = uid("lock");
      expect(await ctx.storage.tryAcquireSystemLock(name, "a", 30)).toBe(true);
      expect(await ctx.storage.tryAcquireSystemLock(name, "b", 30)).toBe(false);
      expect(await ctx.storage.tryAcquireSystemLock(name, "a", 30)).toBe(true);
      expect(await ctx.storage.renewSystemLock(name, "a", 30)).toBe(true);
      expect(await ctx.storage.renewSystemLock(name, "b", 30)).toBe(false);
      await ctx.storage.releaseSystemLock(name, "b");
      expect(await ctx.storage.tryAcquireSystemLock(name, "b", 30)).toBe(false);
      await ctx.storage.releaseSystemLock(name, "a");
      expect(await ctx.storage.renewSystemLock(name, "a", 30)).toBe(false);
      expect(await ctx.storage.tryAcquireSystemLock(name, "b", 30)).toBe(true);
      expect(await ctx.storage.renewSystemLock(uid("unknown"), "a", 30)).toBe(false);
    });

    it("remembers when it was last taken after its release (a sweep task's last run), by name or by prefix", async () => {
      const prefix = uid("last");
      expect(await ctx.storage.systemLockLastTaken(`${prefix}.a`)).toBeNull();
      expect(await ctx.storage.systemLockLastTaken(prefix, { prefix: true })).toBeNull();
      expect(await ctx.storage.tryAcquireSystemLock(`${prefix}.a`, "h", 30)).toBe(true);
      await ctx.storage.releaseSystemLock(`${prefix}.a`, "h");
      const first = await ctx.storage.systemLockLastTaken(`${prefix}.a`);
      expect(first).toBeInstanceOf(Date);
      expect(Math.abs(first!.getTime() - Date.now())).toBeLessThan(60_000);
      await new Promise((r) => setTimeout(r, 20));
      expect(await ctx.storage.tryAcquireSystemLock(`${prefix}.b`, "h", 30)).toBe(true);
      const latest = await ctx.storage.systemLockLastTaken(prefix, { prefix: true });
      expect(latest!.getTime()).toBeGreaterThan(first!.getTime());
      // released, it is free for anyone all the same
      expect(await ctx.storage.tryAcquireSystemLock(`${prefix}.a`, "other", 30)).toBe(true);
    });

    it("is taken over after it expires (fractional lease), and the old holder can no longer renew", async () => {
      const name = uid("lock");
      expect(await ctx.storage.tryAcquireSystemLock(name, "a", 0.3)).toBe(true);
      expect(await ctx.storage.tryAcquireSystemLock(name, "b", 0.3)).toBe(false);
      await sleep(450);
      expect(await ctx.storage.renewSystemLock(name, "a", 30)).toBe(false);
      expect(await ctx.storage.tryAcquireSystemLock(name, "b", 30)).toBe(true);
      expect(await ctx.storage.tryAcquireSystemLock(name, "a", 30)).toBe(false);
    });
  });
}
