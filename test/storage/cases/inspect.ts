// Read-only inspection: counts per status under filters, literal search, an
// instance's timers / subscriptions / groups / archived runs, and the channel
// overview with its "pending" definition per mode.
import { describe, expect, it } from "vitest";
import { json, newInstance, uid, type ContractContext } from "./helpers.ts";

export function inspectCases(ctx: ContractContext): void {
  describe("inspection", () => {
    it("counts instances per status under a search filter, matched literally in the id or the input", async () => {
      const token = uid("needle_%");
      const a = await newInstance(ctx.storage, { inputData: JSON.stringify({ tag: token }) });
      const b = await newInstance(ctx.storage, { inputData: JSON.stringify({ tag: token, more: 1 }) });
      const c = await newInstance(ctx.storage, { instanceId: `${token}-id` });
      await newInstance(ctx.storage, { inputData: JSON.stringify({ tag: token.replace("%", "x") }) });
      expect((await ctx.storage.cancelInstance(b.instanceId, "test"))!.ok).toBe(true);

      const counts = await ctx.storage.countInstancesByStatus({ search: token });
      expect(counts).toEqual({ running: 2, waiting_for_timer: 0, waiting_for_message: 0, waiting_for_child: 0, waiting_for_webhook: 0, compensating: 0, completed: 0, failed: 0, cancelled: 1, parked: 0, quarantined: 0, queued: 0 });
      const page = await ctx.storage.listInstances({ search: token });
      expect(page.instances.map((i) => i.instanceId).sort()).toEqual([a.instanceId, b.instanceId, c.instanceId].sort());
      expect((await ctx.storage.listInstances({ search: token, status: "cancelled" })).instances.map((i) => i.instanceId)).toEqual([b.instanceId]);
      // "%" and "_" are plain characters, not wildcards
      expect((await ctx.storage.countInstancesByStatus({ search: "needle_%x" })).running).toBe(0);
      // other filters combine with the search
      expect(await ctx.storage.countInstancesByStatus({ search: token, workflowName: "no_such_workflow" })).toMatchObject({ running: 0, cancelled: 0 });
      expect((await ctx.storage.countInstancesByStatus({ search: token, startedAfter: new Date(Date.now() + 3_600_000) })).running).toBe(0);
    });

    it("lists an instance's timers, subscriptions (with the wait) and groups", async () => {
      const inst = await newInstance(ctx.storage);
      const [chA, chB, group] = [uid("ch"), uid("ch"), uid("grp")];
      await ctx.storage.subscribe(inst.instanceId, chA, "broadcast");
      await ctx.storage.subscribe(inst.instanceId, chB, "competing");
      await ctx.storage.setWaiting(inst.instanceId, chB, `receive_${chB}:1`, 600);
      await ctx.storage.registerTimer(inst.instanceId, { timerId: "sleep:1", activityId: "sleep:1", delaySeconds: 3600 });
      await ctx.storage.joinGroup(inst.instanceId, group);

      const subs = await ctx.storage.listSubscriptions(inst.instanceId);
      expect(subs.map((s) => [s.channel, s.mode, s.activityId])).toEqual([
        [chA, "broadcast", null],
        [chB, "competing", `receive_${chB}:1`],
      ]);
      expect(subs[1]!.timeoutAt!.getTime()).toBeGreaterThan(Date.now() + 500_000);
      const timers = await ctx.storage.listTimers(inst.instanceId);
      expect(timers).toHaveLength(1);
      expect(timers[0]).toMatchObject({ timerId: "sleep:1", activityId: "sleep:1" });
      expect(timers[0]!.expiresAt.getTime()).toBeGreaterThan(Date.now() + 3_000_000);
      expect((await ctx.storage.listGroups(inst.instanceId)).map((g) => g.group)).toEqual([group]);
      const other = await newInstance(ctx.storage);
      expect(await ctx.storage.listSubscriptions(other.instanceId)).toEqual([]);
      expect(await ctx.storage.listTimers(other.instanceId)).toEqual([]);
      expect(await ctx.storage.listGroups(other.instanceId)).toEqual([]);
    });

    it("summarizes archived recur runs, newest first", async () => {
      const inst = await newInstance(ctx.storage);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w", 30))!;
      await ctx.storage.appendHistory(inst.instanceId, [
        { activityId: "a:1", eventType: "ActivityCompleted", data: json(1) },
        { activityId: "b:1", eventType: "ActivityCompleted", data: json(2) },
      ]);
      expect(await ctx.storage.recurInstance(lease.fence, '{"n":2}')).toBe(true);
      await ctx.storage.appendHistory(inst.instanceId, [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(3) }]);
      expect(await ctx.storage.recurInstance(lease.fence, '{"n":3}')).toBe(true);
      const runs = await ctx.storage.listArchivedRuns(inst.instanceId);
      expect(runs.map((r) => [r.run, r.events])).toEqual([
        [2, 1],
        [1, 2],
      ]);
      expect(runs[0]!.archivedAt).toBeInstanceOf(Date);
      expect(runs[0]!.firstEventAt.getTime()).toBeLessThanOrEqual(runs[0]!.archivedAt.getTime());
    });

    it("reports channels with modes, subscribers, waiting and pending messages per delivery rule", async () => {
      const [bc, queue] = [uid("bc"), uid("queue")];
      // broadcast: a message before anyone subscribed is nobody's; later ones are pending until every subscriber took them
      await ctx.storage.publishMessage({ channel: bc, data: json("before") });
      const [a, b] = [await newInstance(ctx.storage), await newInstance(ctx.storage)];
      await ctx.storage.subscribe(a.instanceId, bc, "broadcast");
      await ctx.storage.subscribe(b.instanceId, bc, "broadcast");
      await ctx.storage.publishMessage({ channel: bc, data: json("m1") });
      await ctx.storage.publishMessage({ channel: bc, data: json("m2") });
      expect((await ctx.storage.takeNextMessage(a.instanceId, bc))!.data).toEqual(json("m1"));
      await ctx.storage.setWaiting(b.instanceId, bc, `receive_${bc}:1`, null);
      // queue: messages published before any consumer are pending; a targeted one until its target claims it
      await ctx.storage.publishMessage({ channel: queue, data: json("q1") });
      await ctx.storage.publishMessage({ channel: queue, data: json("q2") });
      const c = await newInstance(ctx.storage);
      await ctx.storage.publishMessage({ channel: queue, data: json("to-c"), targetInstanceId: c.instanceId });

      const overview = async () => {
        const all = await ctx.storage.channelOverview(10_000);
        return Object.fromEntries(all.filter((s) => s.channel === bc || s.channel === queue).map((s) => [s.channel, s]));
      };
      let o = await overview();
      expect(o[bc]).toMatchObject({ modes: ["broadcast"], subscribers: 2, waiting: 1, messages: 3, pending: 2 });
      expect(o[queue]).toMatchObject({ modes: [], subscribers: 0, waiting: 0, messages: 3, pending: 3 });
      expect(o[bc]!.lastPublishedAt).toBeInstanceOf(Date);
      expect((await ctx.storage.pendingMessages(bc, 10)).map((m) => m.data)).toEqual([json("m1"), json("m2")]);

      const subs = await ctx.storage.channelSubscribers(bc, 10);
      expect(subs.map((s) => [s.instanceId, s.mode, s.available, s.activityId !== null, s.workflowName, s.status])).toEqual([
        [a.instanceId, "broadcast", 1, false, a.workflowName, "running"],
        [b.instanceId, "broadcast", 2, true, b.workflowName, "running"],
      ]);

      await ctx.storage.subscribe(c.instanceId, queue, "competing");
      expect((await ctx.storage.takeNextMessage(c.instanceId, queue))!.data).toEqual(json("q1"));
      expect((await ctx.storage.takeNextMessage(c.instanceId, queue))!.data).toEqual(json("q2"));
      await ctx.storage.takeNextMessage(b.instanceId, bc);
      await ctx.storage.takeNextMessage(b.instanceId, bc);
      await ctx.storage.takeNextMessage(a.instanceId, bc);
      o = await overview();
      expect(o[bc]).toMatchObject({ pending: 0, messages: 3 });
      expect(o[queue]).toMatchObject({ modes: ["competing"], subscribers: 1, pending: 1 });
      expect((await ctx.storage.pendingMessages(queue, 10)).map((m) => [m.data, m.targetInstanceId])).toEqual([[json("to-c"), c.instanceId]]);
      expect((await ctx.storage.channelSubscribers(queue, 10))[0]!.available).toBe(1);
      await ctx.storage.takeNextMessage(c.instanceId, queue);
      expect((await overview())[queue]!.pending).toBe(0);
    });
  });
}
