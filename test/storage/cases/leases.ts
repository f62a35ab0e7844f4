// Leases (acquire / load / renew / release / stale), resumable instances, the
// fenced one-statement step conclusion, and recur.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { HistoryEvent } from "../../../src/storage/records.ts";
import { ALL_BYTES, binary, count, json, newInstance, rows, sleep, uid, UNICODE_JSON, type ContractContext } from "./helpers.ts";

export function leaseCases(ctx: ContractContext): void {
  describe("leases", () => {
    it("acquires a free lease with a new token; a second worker is refused while it holds", async () => {
      const inst = await newInstance(ctx.storage);
      const lease = await ctx.storage.acquireLease(inst.instanceId, "worker-a", 30);
      expect(lease).not.toBeNull();
      expect(lease!.fence).toEqual({ instanceId: inst.instanceId, workerId: "worker-a", token: 1 });
      expect(lease!.history).toEqual([]);
      expect(lease!.instance.lockedBy).toBe("worker-a");
      const ttl = lease!.instance.lockExpiresAt!.getTime() - Date.now();
      expect(ttl).toBeGreaterThan(20_000);
      expect(ttl).toBeLessThan(40_000);
      expect(await ctx.storage.acquireLease(inst.instanceId, "worker-b", 30)).toBeNull();
      expect(await ctx.storage.acquireLease(inst.instanceId, "worker-a", 30)).toBeNull();
    });

    it("loads the history in the same statement, byte- and text-exact", async () => {
      const inst = await newInstance(ctx.storage);
      await ctx.storage.appendHistory(inst.instanceId, [
        { activityId: "a:1", eventType: "ActivityCompleted", data: { type: "json", json: UNICODE_JSON } },
        { activityId: "b:1", eventType: "ActivityCompleted", data: binary(ALL_BYTES) },
        { activityId: "c:1", eventType: "ActivityCompleted", data: binary(new Uint8Array(0)) },
      ]);
      const before = ctx.database.stats.statements;
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30, { withHistory: true }))!;
      expect(ctx.database.stats.statements - before).toBe(1);
      expect(lease.history.map((h) => h.activityId)).toEqual(["a:1", "b:1", "c:1"]);
      expect(lease.history[0]!.data).toEqual({ type: "json", json: UNICODE_JSON });
      expect(lease.history[1]!.data).toEqual({ type: "binary", bytes: ALL_BYTES });
      expect(lease.history[2]!.data).toEqual({ type: "binary", bytes: new Uint8Array(0) });
      expect(lease.history[0]!.createdAt).toBeInstanceOf(Date);
      // Field by field: a leased history's entries parse their time on first read (an accessor, not an own property).
      const fields = (h: HistoryEvent) => ({ id: h.id, activityId: h.activityId, eventType: h.eventType, data: h.data, createdAt: h.createdAt });
      expect(lease.history.map(fields)).toEqual((await ctx.storage.loadHistory(inst.instanceId)).map(fields));
    });

    it("loadLeased returns instance + history only while the fence holds", async () => {
      const inst = await newInstance(ctx.storage);
      await ctx.storage.appendHistory(inst.instanceId, [{ activityId: "a:1", eventType: "ActivityCompleted", data: json({ ok: true }) }]);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      const before = ctx.database.stats.statements;
      const loaded = await ctx.storage.loadLeased(lease.fence);
      expect(ctx.database.stats.statements - before).toBe(1);
      expect(loaded!.fence).toEqual(lease.fence);
      expect(loaded!.history.map((h) => h.activityId)).toEqual(["a:1"]);
      expect(await ctx.storage.loadLeased({ ...lease.fence, token: lease.fence.token + 1 })).toBeNull();
      expect(await ctx.storage.loadLeased({ ...lease.fence, workerId: "other" })).toBeNull();
    });

    it("loadLeasedMany answers each fence in order in one statement, as loadLeased would one by one", async () => {
      const held = await newInstance(ctx.storage);
      await ctx.storage.appendHistory(held.instanceId, [
        { activityId: "a:1", eventType: "ActivityCompleted", data: json({ n: 1 }) },
        { activityId: "b:1", eventType: "ActivityCompleted", data: binary(ALL_BYTES) },
      ]);
      const stale = await newInstance(ctx.storage);
      const expired = await newInstance(ctx.storage);
      const empty = await newInstance(ctx.storage);
      const a = (await ctx.storage.acquireLease(held.instanceId, "w", 30))!;
      const b = (await ctx.storage.acquireLease(stale.instanceId, "w", 30))!;
      const c = (await ctx.storage.acquireLease(expired.instanceId, "w", 0.2))!;
      const d = (await ctx.storage.acquireLease(empty.instanceId, "w", 30))!;
      await sleep(400);
      const fences = [{ ...b.fence, token: b.fence.token + 1 }, c.fence, a.fence, { ...d.fence, workerId: "other" }, d.fence];
      const before = ctx.database.stats.statements;
      const loads = await ctx.storage.loadLeasedMany(fences);
      expect(ctx.database.stats.statements - before).toBe(1);
      const one = await Promise.all(fences.map((f) => ctx.storage.loadLeased(f)));
      const shape = (l: (typeof one)[number]) => (l ? { fence: l.fence, status: l.instance.status, history: l.history.map((h) => [h.id, h.activityId, h.data]) } : null);
      expect(loads.map((l) => (l.ok ? shape(l.leased) : "error"))).toEqual(one.map(shape));
      expect(loads.map((l) => l.ok && l.leased !== null)).toEqual([false, false, true, false, true]);
      expect(await ctx.storage.loadLeasedMany([])).toEqual([]);
    });

    it("renews and releases only with the right fence; every release and acquisition bumps the token", async () => {
      const inst = await newInstance(ctx.storage);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 0.5))!;
      expect(await ctx.storage.renewLease({ ...lease.fence, token: 99 }, 30)).toBe(false);
      expect(await ctx.storage.renewLease(lease.fence, 30)).toBe(true);
      expect((await ctx.storage.getInstance(inst.instanceId))!.lockExpiresAt!.getTime() - Date.now()).toBeGreaterThan(20_000);
      expect(await ctx.storage.releaseLease({ ...lease.fence, workerId: "x" })).toBe(false);
      expect(await ctx.storage.releaseLease(lease.fence)).toBe(true);
      expect(await ctx.storage.releaseLease(lease.fence)).toBe(false);
      const after = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(after).toMatchObject({ lockedBy: null, lockExpiresAt: null, lockToken: 2 });
      const again = (await ctx.storage.acquireLease(inst.instanceId, "w2", 30))!;
      expect(again.fence.token).toBe(3);
    });

    it("a cancel of a leased instance keeps the lock for the fenced-out holder until it gives it back (issue 34)", async () => {
      const inst = await newInstance(ctx.storage);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      // Registered before the step's activities run, fenced: a stale fence writes nothing.
      const comp = { activityId: "compensation:1", activityName: "undo", args: "[]" };
      expect(await ctx.storage.registerCompensations({ ...lease.fence, token: 99 }, [comp])).toBe(false);
      expect(await ctx.storage.listCompensations(inst.instanceId)).toEqual([]);
      expect(await ctx.storage.registerCompensations(lease.fence, [comp])).toBe(true);
      expect(await ctx.storage.registerCompensations(lease.fence, [comp])).toBe(true);
      expect((await ctx.storage.listCompensations(inst.instanceId)).map((c) => c.activityId)).toEqual(["compensation:1"]);
      expect(await ctx.storage.cancelInstance(inst.instanceId, "t")).toMatchObject({ ok: true, status: "compensating" });
      const held = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(held.lockedBy).toBe("ended:w");
      expect(held.lockToken).toBe(lease.fence.token + 1);
      // Nobody takes it while the holder may still be running; the holder's renewal fails (its signal aborts).
      expect(await ctx.storage.acquireLease(inst.instanceId, "other", 30)).toBeNull();
      expect(await ctx.storage.renewLease(lease.fence, 30)).toBe(false);
      expect(await ctx.storage.findResumableInstances(1000)).not.toContain(inst.instanceId);
      // Only the fenced-out holder gives it back, once.
      expect(await ctx.storage.releaseFencedOut({ ...lease.fence, workerId: "other" })).toBe(false);
      expect(await ctx.storage.releaseFencedOut({ ...lease.fence, token: lease.fence.token + 1 })).toBe(false);
      expect(await ctx.storage.releaseFencedOut(lease.fence)).toBe(true);
      expect(await ctx.storage.releaseFencedOut(lease.fence)).toBe(false);
      expect(await ctx.storage.acquireLease(inst.instanceId, "other", 30)).not.toBeNull();
    });

    it("a cancel of an instance nobody holds ends it at once, lock free", async () => {
      const inst = await newInstance(ctx.storage);
      expect(await ctx.storage.cancelInstance(inst.instanceId, "t")).toMatchObject({ ok: true, status: "cancelled" });
      expect((await ctx.storage.getInstance(inst.instanceId))!.lockedBy).toBeNull();
    });

    it("lets another worker take an expired (fractional-second) lease and fences the old holder off", async () => {
      const inst = await newInstance(ctx.storage);
      const old = (await ctx.storage.acquireLease(inst.instanceId, "slow", 0.3))!;
      expect(await ctx.storage.acquireLease(inst.instanceId, "fast", 30)).toBeNull();
      await sleep(450);
      expect(await ctx.storage.loadLeased(old.fence)).toBeNull();
      const taken = (await ctx.storage.acquireLease(inst.instanceId, "fast", 30))!;
      expect(taken.fence.token).toBe(old.fence.token + 1);
      expect(await ctx.storage.renewLease(old.fence, 30)).toBe(false);
      expect((await ctx.storage.concludeStep(old.fence, { status: "completed", outputData: "1" })).ok).toBe(false);
      expect((await ctx.storage.getInstance(inst.instanceId))!).toMatchObject({ status: "running", lockedBy: "fast" });
    });

    it("does not lease an instance that is waiting or finished", async () => {
      const inst = await newInstance(ctx.storage);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      await ctx.storage.concludeStep(lease.fence, { status: "waiting_for_timer", timer: { timerId: "t", activityId: "sleep:1", delaySeconds: 3600 } });
      expect(await ctx.storage.acquireLease(inst.instanceId, "w", 30)).toBeNull();
    });

    it("releases stale leases (bounded) and reports the runnable ones; findResumableInstances lists unlocked runnable instances", async () => {
      const stale = await newInstance(ctx.storage);
      const held = await newInstance(ctx.storage);
      const free = await newInstance(ctx.storage);
      const waiting = await newInstance(ctx.storage);
      const staleLease = (await ctx.storage.acquireLease(stale.instanceId, "w", 0.2))!;
      await ctx.storage.acquireLease(held.instanceId, "w", 30);
      const wl = (await ctx.storage.acquireLease(waiting.instanceId, "w", 30))!;
      await ctx.storage.concludeStep(wl.fence, { status: "waiting_for_timer", timer: { timerId: "t", activityId: "sleep:1", delaySeconds: 3600 } });

      const resumableBefore = await ctx.storage.findResumableInstances(1000);
      expect(resumableBefore).toContain(free.instanceId);
      expect(resumableBefore).not.toContain(stale.instanceId);
      expect(resumableBefore).not.toContain(held.instanceId);
      expect(resumableBefore).not.toContain(waiting.instanceId);

      await sleep(300);
      const released = await ctx.storage.releaseStaleLeases(1000);
      expect(released).toContain(stale.instanceId);
      expect(released).not.toContain(held.instanceId);
      expect((await ctx.storage.getInstance(stale.instanceId))!).toMatchObject({ lockedBy: null, lockToken: staleLease.fence.token + 1 });
      expect(await ctx.storage.renewLease(staleLease.fence, 30)).toBe(false);
      expect(await ctx.storage.findResumableInstances(1000)).toContain(stale.instanceId);
      expect(await ctx.storage.releaseStaleLeases(1000)).not.toContain(stale.instanceId);
    });

    it("findResumableInstances with a minimum idle time skips instances touched more recently", async () => {
      const fresh = await newInstance(ctx.storage);
      expect(await ctx.storage.findResumableInstances(1000, 0.3)).not.toContain(fresh.instanceId);
      await sleep(400);
      expect(await ctx.storage.findResumableInstances(1000, 0.3)).toContain(fresh.instanceId);
    });
  });

  describe("concludeStep", () => {
    it("writes history, compensations, status and hands the lease off in one statement", async () => {
      const inst = await newInstance(ctx.storage);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      const before = ctx.database.stats.statements;
      const res = await ctx.storage.concludeStep(lease.fence, {
        status: "running",
        currentActivityId: "reserve:1",
        history: [
          { activityId: "reserve:1", eventType: "ActivityCompleted", data: json({ r: "r-1" }) },
          { activityId: "blob:1", eventType: "ActivityCompleted", data: binary(ALL_BYTES) },
        ],
        compensations: [
          { activityId: "reserve:1", activityName: "release", args: '["o-1"]' },
          { activityId: "charge:1", activityName: "refund", args: "[]" },
        ],
        handoff: { leaseSeconds: 5 },
      });
      expect(ctx.database.stats.statements - before).toBe(1);
      expect(res).toEqual({ ok: true, token: lease.fence.token + 1 });
      const after = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(after).toMatchObject({ status: "running", currentActivityId: "reserve:1", lockedBy: "w", lockToken: lease.fence.token + 1 });
      expect(after.lockExpiresAt!.getTime() - Date.now()).toBeLessThan(6_000);
      const next = await ctx.storage.loadLeased({ ...lease.fence, token: res.token! });
      expect(next!.history.map((h) => [h.activityId, h.data])).toEqual([
        ["reserve:1", json({ r: "r-1" })],
        ["blob:1", binary(ALL_BYTES)],
      ]);
      expect((await ctx.storage.listCompensations(inst.instanceId)).map((c) => c.activityName)).toEqual(["refund", "release"]);
      // the previous token is dead
      expect(await ctx.storage.loadLeased(lease.fence)).toBeNull();
    });

    it("with a stale token changes nothing at all", async () => {
      const inst = await newInstance(ctx.storage);
      const channel = uid("ch");
      await ctx.storage.subscribe(inst.instanceId, channel, "broadcast");
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      const snapshot = await ctx.storage.getInstance(inst.instanceId);
      for (const fence of [{ ...lease.fence, token: lease.fence.token - 1 }, { ...lease.fence, workerId: "zombie" }]) {
        for (const status of ["running", "waiting_for_timer", "completed"] as const) {
          const res = await ctx.storage.concludeStep(fence, {
            status,
            currentActivityId: "x:1",
            outputData: "1",
            errorData: "{}",
            history: [{ activityId: "x:1", eventType: "ActivityCompleted", data: json(1) }],
            compensations: [{ activityId: "x:1", activityName: "undo", args: "[]" }],
            timer: { timerId: "t", activityId: "sleep:1", delaySeconds: 1 },
            handoff: { leaseSeconds: 30 },
          });
          expect(res).toEqual({ ok: false });
        }
      }
      expect(await ctx.storage.getInstance(inst.instanceId)).toEqual(snapshot);
      expect(await ctx.storage.loadHistory(inst.instanceId)).toEqual([]);
      expect(await ctx.storage.listCompensations(inst.instanceId)).toEqual([]);
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_timer_subscriptions WHERE instance_id = ${inst.instanceId}`)).toBe(0);
      expect(await ctx.storage.getSubscription(inst.instanceId, channel)).not.toBeNull();
    });

    it("suspends on a timer: lease released, the timer keeps its first expiry, output/error untouched unless given", async () => {
      const inst = await newInstance(ctx.storage);
      let lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      const res = await ctx.storage.concludeStep(lease.fence, {
        status: "waiting_for_timer",
        currentActivityId: "sleep:1",
        timer: { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: 3600 },
        handoff: { leaseSeconds: 30 }, // ignored: a waiting instance is never left locked
      });
      expect(res).toEqual({ ok: true });
      const after = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(after).toMatchObject({ status: "waiting_for_timer", currentActivityId: "sleep:1", lockedBy: null, lockExpiresAt: null, lockToken: lease.fence.token + 1 });
      const [timer] = await rows<{ expires_at: unknown }>(ctx.database, sql`SELECT expires_at::text AS expires_at FROM workflow_timer_subscriptions WHERE instance_id = ${inst.instanceId}`);

      // a replayed registration of the same timer keeps the first expiry
      await ctx.database.db.execute(sql`UPDATE workflow_instances SET status = 'running' WHERE instance_id = ${inst.instanceId}`);
      lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      await ctx.storage.concludeStep(lease.fence, { status: "running", outputData: '"partial"', timer: { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: 5 }, handoff: { leaseSeconds: 30 } });
      const timers = await rows<{ expires_at: unknown }>(ctx.database, sql`SELECT expires_at::text AS expires_at FROM workflow_timer_subscriptions WHERE instance_id = ${inst.instanceId}`);
      expect(timers).toEqual([timer]);
      const mid = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(mid.outputData).toBe('"partial"');
      expect(mid.currentActivityId).toBe("sleep:1"); // not given: unchanged
      lease = (await ctx.storage.loadLeased({ ...lease.fence, token: mid.lockToken }))!;
      await ctx.storage.concludeStep(lease.fence, { status: "failed", errorData: '{"error_type":"Error","error_message":"boom"}', currentActivityId: null });
      const failed = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(failed).toMatchObject({ status: "failed", outputData: '"partial"', errorData: '{"error_type":"Error","error_message":"boom"}', currentActivityId: null, lockedBy: null });
    });

    it("on a terminal status leaves subscriptions, cursors, groups and timers", async () => {
      const inst = await newInstance(ctx.storage);
      const channel = uid("ch");
      await ctx.storage.subscribe(inst.instanceId, channel, "broadcast");
      await ctx.storage.publishMessage({ channel, data: json(1) });
      expect(await ctx.storage.takeNextMessage(inst.instanceId, channel)).not.toBeNull();
      await ctx.storage.joinGroup(inst.instanceId, uid("g"));
      await ctx.storage.registerTimer(inst.instanceId, { timerId: "t", activityId: "t:1", delaySeconds: 3600 });
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      const res = await ctx.storage.concludeStep(lease.fence, { status: "completed", outputData: '{"done":true}', handoff: { leaseSeconds: 30 } });
      expect(res).toEqual({ ok: true });
      for (const table of ["channel_subscriptions", "channel_delivery_cursors", "workflow_group_memberships", "workflow_timer_subscriptions"]) {
        expect(await count(ctx.database, sql`SELECT 1 FROM ${sql.raw(table)} WHERE instance_id = ${inst.instanceId}`), table).toBe(0);
      }
      expect((await ctx.storage.getInstance(inst.instanceId))!).toMatchObject({ status: "completed", outputData: '{"done":true}', lockedBy: null });
    });

    it("fails loudly (and writes nothing) when a history activity id is already recorded", async () => {
      const inst = await newInstance(ctx.storage);
      await ctx.storage.appendHistory(inst.instanceId, [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(1) }]);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      await expect(
        ctx.storage.concludeStep(lease.fence, { status: "completed", history: [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(2) }] }),
      ).rejects.toThrow();
      expect((await ctx.storage.getInstance(inst.instanceId))!).toMatchObject({ status: "running", lockToken: lease.fence.token });
    });
  });

  describe("concludeSteps (group commit)", () => {
    it("concludes several steps in one statement, each under its own fence: a failed fence writes nothing, the others are written", async () => {
      const [a, b, c, d] = [await newInstance(ctx.storage), await newInstance(ctx.storage), await newInstance(ctx.storage), await newInstance(ctx.storage)];
      const channel = uid("ch");
      await ctx.storage.subscribe(c.instanceId, channel, "broadcast");
      await ctx.storage.joinGroup(c.instanceId, uid("g"));
      const [la, lb, lc, ld] = await Promise.all([a, b, c, d].map(async (i) => (await ctx.storage.acquireLease(i.instanceId, "w", 30))!));
      const stale = { ...lb!.fence, token: lb!.fence.token - 1 };
      const before = ctx.database.stats.statements;
      const res = await ctx.storage.concludeSteps([
        {
          fence: la!.fence,
          conclusion: {
            status: "running",
            currentActivityId: "x:1",
            history: [
              { activityId: "x:1", eventType: "ActivityCompleted", data: json({ text: UNICODE_JSON }) },
              { activityId: "blob:1", eventType: "ActivityCompleted", data: binary(ALL_BYTES) },
            ],
            compensations: [{ activityId: "x:1", activityName: "undo", args: '["a"]' }],
            handoff: { leaseSeconds: 30 },
          },
        },
        { fence: stale, conclusion: { status: "completed", outputData: "1", history: [{ activityId: "y:1", eventType: "ActivityCompleted", data: json(1) }] } },
        { fence: lc!.fence, conclusion: { status: "completed", outputData: '{"done":true}', history: [{ activityId: "z:1", eventType: "ActivityCompleted", data: json(2) }] } },
        { fence: ld!.fence, conclusion: { status: "waiting_for_timer", currentActivityId: "sleep:1", timer: { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: 3600 } } },
      ]);
      expect(ctx.database.stats.statements - before).toBe(1);
      expect(res).toEqual([{ ok: true, token: la!.fence.token + 1 }, { ok: false }, { ok: true }, { ok: true }]);
      const next = (await ctx.storage.loadLeased({ ...la!.fence, token: res[0]!.token! }))!;
      expect(next.instance).toMatchObject({ status: "running", currentActivityId: "x:1", lockedBy: "w" });
      expect(next.history.map((h) => [h.activityId, h.data])).toEqual([
        ["x:1", json({ text: UNICODE_JSON })],
        ["blob:1", binary(ALL_BYTES)],
      ]);
      expect((await ctx.storage.listCompensations(a.instanceId)).map((x) => [x.activityId, x.activityName, x.args])).toEqual([["x:1", "undo", '["a"]']]);
      // The stale row wrote nothing.
      expect((await ctx.storage.getInstance(b.instanceId))!).toMatchObject({ status: "running", outputData: null, lockedBy: "w", lockToken: lb!.fence.token });
      expect(await ctx.storage.loadHistory(b.instanceId)).toEqual([]);
      // The finished one left its subscription and group.
      expect((await ctx.storage.getInstance(c.instanceId))!).toMatchObject({ status: "completed", outputData: '{"done":true}', lockedBy: null });
      expect((await ctx.storage.loadHistory(c.instanceId)).map((h) => h.activityId)).toEqual(["z:1"]);
      expect(await ctx.storage.getSubscription(c.instanceId, channel)).toBeNull();
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_group_memberships WHERE instance_id = ${c.instanceId}`)).toBe(0);
      expect((await ctx.storage.getInstance(d.instanceId))!).toMatchObject({ status: "waiting_for_timer", currentActivityId: "sleep:1", lockedBy: null, lockExpiresAt: null });
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_timer_subscriptions WHERE instance_id = ${d.instanceId} AND expires_at > now() + interval '59 minutes'`)).toBe(1);
    });

    it("a statement error (one row's history already recorded) writes nothing for any row", async () => {
      const [a, b] = [await newInstance(ctx.storage), await newInstance(ctx.storage)];
      await ctx.storage.appendHistory(b.instanceId, [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(1) }]);
      const [la, lb] = [(await ctx.storage.acquireLease(a.instanceId, "w", 30))!, (await ctx.storage.acquireLease(b.instanceId, "w", 30))!];
      await expect(
        ctx.storage.concludeSteps([
          { fence: la.fence, conclusion: { status: "completed", history: [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(2) }] } },
          { fence: lb.fence, conclusion: { status: "completed", history: [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(2) }] } },
        ]),
      ).rejects.toThrow();
      expect((await ctx.storage.getInstance(a.instanceId))!).toMatchObject({ status: "running", lockToken: la.fence.token });
      expect(await ctx.storage.loadHistory(a.instanceId)).toEqual([]);
    });
  });

  describe("recur", () => {
    it("archives the run, starts run+1 with new input and keeps lease, subscriptions, cursors and groups", async () => {
      const inst = await newInstance(ctx.storage);
      const channel = uid("jobs");
      const group = uid("workers");
      await ctx.storage.subscribe(inst.instanceId, channel, "broadcast");
      await ctx.storage.publishMessage({ channel, data: json("job-1") });
      await ctx.storage.takeNextMessage(inst.instanceId, channel);
      await ctx.storage.joinGroup(inst.instanceId, group);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      await ctx.storage.concludeStep(lease.fence, {
        status: "running",
        history: [
          { activityId: "a:1", eventType: "ActivityCompleted", data: { type: "json", json: UNICODE_JSON } },
          { activityId: "b:1", eventType: "ActivityCompleted", data: binary(ALL_BYTES) },
        ],
        compensations: [{ activityId: "a:1", activityName: "undo", args: "[]" }],
        timer: { timerId: "retry", activityId: "retry:1", delaySeconds: 3600 },
        handoff: { leaseSeconds: 30 },
      });
      const fence = { ...lease.fence, token: lease.fence.token + 1 };
      const subBefore = await ctx.storage.getSubscription(inst.instanceId, channel);

      expect(await ctx.storage.recurInstance({ ...fence, token: 1 }, '{"n":2}')).toBe(false);
      expect(await ctx.storage.recurInstance(fence, '{"n":2}')).toBe(true);

      const after = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(after).toMatchObject({ run: 2, inputData: '{"n":2}', status: "running", outputData: null, errorData: null, currentActivityId: null, lockedBy: "w", lockToken: fence.token });
      expect(await ctx.storage.loadHistory(inst.instanceId)).toEqual([]);
      const archived = await ctx.storage.loadArchivedHistory(inst.instanceId);
      expect(archived.map((a) => [a.run, a.activityId, a.data])).toEqual([
        [1, "a:1", { type: "json", json: UNICODE_JSON }],
        [1, "b:1", binary(ALL_BYTES)],
      ]);
      expect(archived[0]!.archivedAt).toBeInstanceOf(Date);
      expect(await ctx.storage.loadArchivedHistory(inst.instanceId, 2)).toEqual([]);
      expect(await ctx.storage.getSubscription(inst.instanceId, channel)).toEqual(subBefore);
      expect(await count(ctx.database, sql`SELECT 1 FROM channel_delivery_cursors WHERE instance_id = ${inst.instanceId}`)).toBe(1);
      expect(await ctx.storage.groupMembers(group)).toEqual([inst.instanceId]);
      expect(await ctx.storage.listCompensations(inst.instanceId)).toEqual([]);
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_timer_subscriptions WHERE instance_id = ${inst.instanceId}`)).toBe(0);
      expect(await ctx.storage.loadLeased(fence)).not.toBeNull();

      // the next run records at the same activity ids, then recurs again
      await ctx.storage.appendHistory(inst.instanceId, [{ activityId: "a:1", eventType: "ActivityCompleted", data: json("run2") }]);
      expect(await ctx.storage.recurInstance(fence, '{"n":3}')).toBe(true);
      expect((await ctx.storage.loadArchivedHistory(inst.instanceId, 2)).map((a) => a.data)).toEqual([json("run2")]);
      expect((await ctx.storage.getInstance(inst.instanceId))!.run).toBe(3);
    });
  });
}
