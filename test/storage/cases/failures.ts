// Poison isolation, retention and history pages in storage: failures counted
// on the instance row, quarantine sets it aside (its timers and waits are
// skipped until an operator resumes it), retention deletes only old finished
// instances, in bounded batches, with everything they own.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { count, json, newInstance, rows, uid, type ContractContext } from "./helpers.ts";

export function failureCases(ctx: ContractContext): void {
  const failure = (maxFailures: number) => ({ task: "timers" as const, errorType: "Boom", message: "row cannot be recorded", maxFailures });
  const age = (instanceId: string, seconds: number) =>
    ctx.database.db.execute(sql`UPDATE workflow_instances SET updated_at = now() - make_interval(secs => ${seconds}::float8) WHERE instance_id = ${instanceId}`);

  describe("poison isolation", () => {
    it("counts failures on the instance and quarantines it at the limit; its due timer waits until it is resumed", async () => {
      const inst = await newInstance(ctx.storage);
      await ctx.database.db.execute(sql`UPDATE workflow_instances SET status = 'waiting_for_timer' WHERE instance_id = ${inst.instanceId}`);
      await ctx.storage.registerTimer(inst.instanceId, { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: -1 });

      expect(await ctx.storage.recordInstanceFailure(inst.instanceId, failure(3))).toEqual({ status: "waiting_for_timer", failureCount: 1 });
      expect(await ctx.storage.recordInstanceFailure(inst.instanceId, failure(3))).toEqual({ status: "waiting_for_timer", failureCount: 2 });
      expect(await ctx.storage.recordInstanceFailure(inst.instanceId, failure(3))).toEqual({ status: "quarantined", failureCount: 3 });
      // set aside: counted no further, its timer is neither fired nor offered to the in-process wake-up
      expect(await ctx.storage.recordInstanceFailure(inst.instanceId, failure(3))).toBeNull();
      const after = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(after.status).toBe("quarantined");
      expect(JSON.parse(after.failureData!)).toMatchObject({ task: "timers", error_type: "Boom", message: "row cannot be recorded", attempts: 3, previous_status: "waiting_for_timer" });
      expect(await ctx.storage.fireExpiredTimers(100, inst.instanceId)).toEqual([]);
      expect(await ctx.storage.findDueInstances("timers", 10_000)).not.toContain(inst.instanceId);

      // an operator's resume: back to its status with the timer kept, which then fires
      expect(await ctx.storage.resumeQuarantined(inst.instanceId)).toEqual({ ok: true, status: "waiting_for_timer" });
      expect(await ctx.storage.resumeQuarantined(inst.instanceId)).toEqual({ ok: false, status: "waiting_for_timer" });
      expect((await ctx.storage.getInstance(inst.instanceId))!.failureCount).toBe(0);
      expect(await ctx.storage.fireExpiredTimers(100, inst.instanceId)).toEqual([inst.instanceId]);
      expect((await ctx.storage.getInstance(inst.instanceId))!.status).toBe("running");
      expect(await ctx.storage.resumeQuarantined(uid("missing"))).toBeNull();
    });

    it("a step's failure is fenced by its lease and releases it; a concluded step resets the count", async () => {
      const inst = await newInstance(ctx.storage);
      const leased = (await ctx.storage.acquireLease(inst.instanceId, "w1", 60))!;
      const stale = { ...leased.fence, token: leased.fence.token - 1 };
      expect(await ctx.storage.recordInstanceFailure(inst.instanceId, { ...failure(5), task: "step", fence: stale })).toBeNull();
      expect(await ctx.storage.recordInstanceFailure(inst.instanceId, { ...failure(5), task: "step", fence: leased.fence })).toEqual({ status: "running", failureCount: 1 });
      const released = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(released.lockedBy).toBeNull();

      const again = (await ctx.storage.acquireLease(inst.instanceId, "w2", 60))!;
      expect(again).not.toBeNull();
      expect((await ctx.storage.concludeStep(again.fence, { status: "running", history: [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(1) }] })).ok).toBe(true);
      const concluded = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(concluded.failureCount).toBe(0);
      expect(concluded.failureData).toBeNull();
    });

    it("a sweep task's failure never touches an instance a live step holds, nor a finished one", async () => {
      const held = await newInstance(ctx.storage);
      await ctx.storage.acquireLease(held.instanceId, "w1", 60);
      expect(await ctx.storage.recordInstanceFailure(held.instanceId, failure(1))).toBeNull();
      const done = await newInstance(ctx.storage);
      await ctx.database.db.execute(sql`UPDATE workflow_instances SET status = 'completed' WHERE instance_id = ${done.instanceId}`);
      expect(await ctx.storage.recordInstanceFailure(done.instanceId, failure(1))).toBeNull();
      // retention counts on a finished instance but never changes its status
      expect(await ctx.storage.recordInstanceFailure(done.instanceId, { ...failure(1), task: "retention" })).toEqual({ status: "completed", failureCount: 1 });
    });

    it("a quarantined instance can be cancelled", async () => {
      const inst = await newInstance(ctx.storage);
      await ctx.storage.recordInstanceFailure(inst.instanceId, failure(1));
      const r = await ctx.storage.cancelInstance(inst.instanceId, "operator");
      expect(r).toEqual({ ok: true, status: "cancelled", previousStatus: "quarantined" });
    });
  });

  describe("retention", () => {
    it("deletes old finished instances with everything they own; young, running and set-aside ones stay", async () => {
      const old = await newInstance(ctx.storage);
      const young = await newInstance(ctx.storage);
      const running = await newInstance(ctx.storage);
      const stuck = await newInstance(ctx.storage);
      for (const i of [old, young, stuck]) await ctx.database.db.execute(sql`UPDATE workflow_instances SET status = 'completed' WHERE instance_id = ${i.instanceId}`);
      for (const i of [old, running, stuck]) await age(i.instanceId, 3600);
      await ctx.storage.recordInstanceFailure(stuck.instanceId, { ...failure(2), task: "retention" });
      await ctx.storage.recordInstanceFailure(stuck.instanceId, { ...failure(2), task: "retention" });
      await ctx.storage.appendHistory(old.instanceId, [
        { activityId: "a:1", eventType: "ActivityCompleted", data: json(1) },
        { activityId: "a:2#1", eventType: "ActivityAttemptFailed", data: json({}) },
      ]);
      await ctx.storage.addCompensations(old.instanceId, [{ activityId: "c:1", activityName: "undo", args: "[]" }]);
      await ctx.database.db.execute(sql`INSERT INTO workflow_history_archive (instance_id, run, activity_id, event_type, data_type, event_data, created_at)
                                         VALUES (${old.instanceId}, 1, 'a:1', 'ActivityCompleted', 'json', '1', now())`);
      await age(old.instanceId, 3600);

      expect(await ctx.storage.findPurgeableInstances(60, 10_000, 2)).toContain(old.instanceId);
      const purged: string[] = [];
      for (;;) {
        const batch = await ctx.storage.purgeFinishedInstances(60, 2, { maxFailures: 2 });
        expect(batch.length).toBeLessThanOrEqual(2);
        purged.push(...batch);
        if (batch.length < 2) break;
      }
      expect(purged).toContain(old.instanceId);
      for (const kept of [young, running, stuck]) expect(purged).not.toContain(kept.instanceId);
      expect(await ctx.storage.getInstance(old.instanceId)).toBeNull();
      for (const table of ["workflow_history", "workflow_history_archive", "workflow_compensations"]) {
        expect(await count(ctx.database, sql`SELECT 1 FROM ${sql.raw(table)} WHERE instance_id = ${old.instanceId}`)).toBe(0);
      }
      for (const kept of [young, running, stuck]) expect(await ctx.storage.getInstance(kept.instanceId)).not.toBeNull();
    });

    it("deletes CloudEvent dedupe rows past the retention only", async () => {
      const source = `/${uid("src")}`;
      await ctx.storage.recordCloudEvent(source, "old");
      await ctx.storage.recordCloudEvent(source, "new");
      await ctx.database.db.execute(sql`UPDATE cloudevent_dedupe SET received_at = now() - interval '2 hours' WHERE source = ${source} AND event_id = 'old'`);
      while ((await ctx.storage.purgeCloudEventDedupe(3600, 50)) === 50);
      const left = await rows<{ event_id: string }>(ctx.database, sql`SELECT event_id FROM cloudevent_dedupe WHERE source = ${source}`);
      expect(left.map((r) => r.event_id)).toEqual(["new"]);
      expect(await ctx.storage.recordCloudEvent(source, "old")).toBe(true);
    });
  });

  describe("messages Postgres's jsonb refuses", () => {
    it("a lone surrogate or \\u0000 escape (valid JSON) is stored and read back exactly", async () => {
      const channel = uid("odd");
      const texts = ['{"s":"\\ud800"}', '{"z":"a\\u0000b"}', '["\\udfff",1]'];
      for (const text of texts) {
        expect(() => JSON.parse(text)).not.toThrow();
        await ctx.storage.publishMessage({ channel, data: { type: "json", json: text }, metadata: JSON.stringify({ m: "\ud800" }) });
      }
      const stored = await rows<{ data: string }>(ctx.database, sql`SELECT data FROM channel_messages WHERE channel = ${channel} ORDER BY id`);
      expect(stored.map((r) => r.data)).toEqual(texts);
    });
  });

  describe("history pages", () => {
    it("pages through the history in order with a cursor", async () => {
      const inst = await newInstance(ctx.storage);
      await ctx.storage.appendHistory(inst.instanceId, Array.from({ length: 7 }, (_, i) => ({ activityId: `a:${i + 1}`, eventType: "ActivityCompleted", data: json(i) })));
      const seen: string[] = [];
      let after = 0;
      for (let pages = 0; ; pages++) {
        expect(pages).toBeLessThan(5);
        const page = await ctx.storage.loadHistoryPage(inst.instanceId, after, 3);
        expect(page.events.length).toBeLessThanOrEqual(3);
        seen.push(...page.events.map((e) => e.activityId));
        if (page.nextAfterId === null) break;
        after = page.nextAfterId;
      }
      expect(seen).toEqual(["a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7"]);
      expect((await ctx.storage.loadHistoryPage(inst.instanceId, 0, 7)).nextAfterId).toBeNull();
    });
  });
}
