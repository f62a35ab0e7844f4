// History payload exactness, compensations, timers.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ALL_BYTES, binary, count, json, newInstance, rows, uid, UNICODE_JSON, type ContractContext } from "./helpers.ts";

export function historyCases(ctx: ContractContext): void {
  describe("history payloads", () => {
    it("round-trips binary payloads byte-exact (all 256 values, empty, large) as plain Uint8Arrays", async () => {
      const inst = await newInstance(ctx.storage);
      const large = Uint8Array.from({ length: 200_000 }, (_, i) => (i * 7919) % 256);
      const view = new Uint8Array(new Uint8Array([9, 9, 1, 2, 3, 9]).buffer, 2, 3); // a view with an offset
      await ctx.storage.appendHistory(inst.instanceId, [
        { activityId: "all:1", eventType: "ActivityCompleted", data: binary(ALL_BYTES) },
        { activityId: "empty:1", eventType: "ActivityCompleted", data: binary(new Uint8Array(0)) },
        { activityId: "large:1", eventType: "ActivityCompleted", data: binary(large) },
        { activityId: "view:1", eventType: "ActivityCompleted", data: binary(view) },
      ]);
      const history = await ctx.storage.loadHistory(inst.instanceId);
      expect(history.map((h) => h.activityId)).toEqual(["all:1", "empty:1", "large:1", "view:1"]);
      const bytes = history.map((h) => (h.data.type === "binary" ? h.data.bytes : null));
      expect(bytes[0]).toEqual(ALL_BYTES);
      expect(bytes[1]).toEqual(new Uint8Array(0));
      expect(bytes[2]).toEqual(large);
      expect(bytes[3]).toEqual(new Uint8Array([1, 2, 3]));
      for (const b of bytes) {
        expect(Object.getPrototypeOf(b)).toBe(Uint8Array.prototype);
        expect(b!.byteOffset).toBe(0);
        expect(b!.buffer.byteLength).toBe(b!.byteLength);
      }
      // ids follow the given order and are numbers
      expect(history.every((h, i) => i === 0 || h.id > history[i - 1]!.id)).toBe(true);
      expect(typeof history[0]!.id).toBe("number");
    });

    it("round-trips unicode JSON text exactly (emoji, CJK, combining marks, escapes, formatting)", async () => {
      expect(() => JSON.parse(UNICODE_JSON)).not.toThrow();
      const inst = await newInstance(ctx.storage, { inputData: UNICODE_JSON });
      expect(inst.inputData).toBe(UNICODE_JSON);
      await ctx.storage.appendHistory(inst.instanceId, [{ activityId: "u:1", eventType: "ActivityCompleted", data: { type: "json", json: UNICODE_JSON } }]);
      const [event] = await ctx.storage.loadHistory(inst.instanceId);
      expect(event!.data).toEqual({ type: "json", json: UNICODE_JSON });
      expect((await ctx.storage.getInstance(inst.instanceId))!.inputData).toBe(UNICODE_JSON);
      // NFC and NFD forms stay distinct: nothing normalizes the text
      const [nfd] = await rows<{ t: string }>(ctx.database, sql`SELECT ${"e\u0301"}::text AS t`);
      expect(nfd!.t).toBe("e\u0301");
    });

    it("rejects a second outcome at the same activity id", async () => {
      const inst = await newInstance(ctx.storage);
      await ctx.storage.appendHistory(inst.instanceId, [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(1) }]);
      await expect(ctx.storage.appendHistory(inst.instanceId, [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(2) }])).rejects.toThrow();
      await ctx.storage.appendHistory(inst.instanceId, []);
      expect(await ctx.storage.loadHistory(inst.instanceId)).toHaveLength(1);
    });
  });

  describe("compensations", () => {
    it("records each activity id once and lists newest first (LIFO)", async () => {
      const inst = await newInstance(ctx.storage);
      await ctx.storage.addCompensations(inst.instanceId, [
        { activityId: "a:1", activityName: "undo_a", args: '["x"]' },
        { activityId: "b:1", activityName: "undo_b", args: "[]" },
      ]);
      await ctx.storage.addCompensations(inst.instanceId, [
        { activityId: "a:1", activityName: "undo_a", args: '["replayed"]' },
        { activityId: "c:1", activityName: "undo_c", args: `["${"漢"}"]` },
      ]);
      await ctx.storage.addCompensations(inst.instanceId, []);
      const list = await ctx.storage.listCompensations(inst.instanceId);
      expect(list.map((c) => [c.activityId, c.activityName, c.args])).toEqual([
        ["c:1", "undo_c", '["漢"]'],
        ["b:1", "undo_b", "[]"],
        ["a:1", "undo_a", '["x"]'],
      ]);
      expect(list[0]!.createdAt).toBeInstanceOf(Date);
    });
  });

  describe("timers", () => {
    it("requires an expiry and reports the earliest pending one", async () => {
      const inst = await newInstance(ctx.storage);
      await expect(ctx.storage.registerTimer(inst.instanceId, { timerId: "t", activityId: "sleep:1" })).rejects.toThrow(/expiresAt or delaySeconds/);
      const at = new Date(Date.now() - 365 * 24 * 3600_000); // earlier than anything else in the database
      await ctx.storage.registerTimer(inst.instanceId, { timerId: "t", activityId: "sleep:1", expiresAt: at });
      expect((await ctx.storage.nextTimerExpiry())!.getTime()).toBe(at.getTime());
      await ctx.storage.fireExpiredTimers(1000);
      const next = await ctx.storage.nextTimerExpiry();
      expect(next === null || next.getTime() > at.getTime()).toBe(true);
    });

    it("fires due timers: TimerExpired at the timer's activity id, timer deleted, waiting instance runnable", async () => {
      const waiting = await newInstance(ctx.storage);
      const lease = (await ctx.storage.acquireLease(waiting.instanceId, "w", 30))!;
      await ctx.storage.concludeStep(lease.fence, { status: "waiting_for_timer", currentActivityId: "sleep:1", timer: { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: 0 } });
      const notDue = await newInstance(ctx.storage);
      await ctx.storage.registerTimer(notDue.instanceId, { timerId: "later", activityId: "sleep:1", delaySeconds: 3600 });
      const running = await newInstance(ctx.storage); // e.g. a durable retry timer while running
      await ctx.storage.registerTimer(running.instanceId, { timerId: "retry", activityId: "retry:1", expiresAt: new Date(Date.now() - 1000) });
      const already = await newInstance(ctx.storage); // outcome already recorded: ON CONFLICT DO NOTHING
      await ctx.storage.appendHistory(already.instanceId, [{ activityId: "sleep:1", eventType: "TimerExpired", data: json("earlier") }]);
      await ctx.storage.registerTimer(already.instanceId, { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: 0 });

      const fired = await ctx.storage.fireExpiredTimers(1000);
      expect(fired).toEqual(expect.arrayContaining([waiting.instanceId, running.instanceId, already.instanceId]));
      expect(fired).not.toContain(notDue.instanceId);
      expect(new Set(fired).size).toBe(fired.length);

      const [event] = await ctx.storage.loadHistory(waiting.instanceId);
      expect(event).toMatchObject({ activityId: "sleep:1", eventType: "TimerExpired" });
      const payload = JSON.parse(event!.data.type === "json" ? event!.data.json : "null") as { timer_id: string; expired_at: string };
      expect(payload.timer_id).toBe("sleep:1");
      expect(payload.expired_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect((await ctx.storage.getInstance(waiting.instanceId))!.status).toBe("running");
      expect((await ctx.storage.getInstance(running.instanceId))!.status).toBe("running");
      expect((await ctx.storage.loadHistory(running.instanceId)).map((h) => h.activityId)).toEqual(["retry:1"]);
      expect((await ctx.storage.loadHistory(already.instanceId)).map((h) => h.data)).toEqual([json("earlier")]);
      for (const id of [waiting.instanceId, running.instanceId, already.instanceId]) {
        expect(await count(ctx.database, sql`SELECT 1 FROM workflow_timer_subscriptions WHERE instance_id = ${id}`)).toBe(0);
      }
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_timer_subscriptions WHERE instance_id = ${notDue.instanceId}`)).toBe(1);
      expect(await ctx.storage.fireExpiredTimers(1000)).not.toContain(waiting.instanceId);
    });

    it("fires in bounded batches", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const inst = await newInstance(ctx.storage);
        ids.push(inst.instanceId);
        await ctx.storage.registerTimer(inst.instanceId, { timerId: uid("t"), activityId: "sleep:1", delaySeconds: 0 });
      }
      const seen: string[] = [];
      for (let batch = await ctx.storage.fireExpiredTimers(2); batch.length > 0; batch = await ctx.storage.fireExpiredTimers(2)) {
        expect(batch.length).toBeLessThanOrEqual(2);
        seen.push(...batch);
      }
      expect(seen).toEqual(expect.arrayContaining(ids));
    });
  });
}
