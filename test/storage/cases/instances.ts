// Definitions, instance create/get/list, cancellation.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/core/errors.ts";
import { count, json, newInstance, SOURCE_HASH, uid, WORKFLOW, type ContractContext } from "./helpers.ts";

export function instanceCases(ctx: ContractContext): void {
  describe("definitions and instances", () => {
    it("upserts a workflow definition idempotently", async () => {
      const name = uid("def");
      await ctx.storage.upsertWorkflowDefinition(name, SOURCE_HASH, "v1");
      await ctx.storage.upsertWorkflowDefinition(name, SOURCE_HASH, "v1 again");
      await ctx.storage.upsertWorkflowDefinition(name, "b".repeat(64), "v2");
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_definitions WHERE workflow_name = ${name}`)).toBe(2);
    });

    it("creates an instance, and returns the existing row (created=false) for a known id", async () => {
      const id = uid("wf");
      const first = await ctx.storage.createInstance({
        instanceId: id,
        workflowName: WORKFLOW,
        sourceHash: SOURCE_HASH,
        ownerService: "svc",
        inputData: '{"order":"o-1"}',
        lockTimeoutSeconds: 42,
      });
      expect(first.created).toBe(true);
      expect(first.instance).toMatchObject({
        instanceId: id,
        workflowName: WORKFLOW,
        status: "running",
        run: 1,
        inputData: '{"order":"o-1"}',
        outputData: null,
        errorData: null,
        cancelData: null,
        lockedBy: null,
        lockToken: 0,
        lockExpiresAt: null,
        lockTimeoutSeconds: 42,
        currentActivityId: null,
      });
      expect(first.instance.startedAt).toBeInstanceOf(Date);
      expect(Math.abs(first.instance.startedAt.getTime() - Date.now())).toBeLessThan(60_000);

      const again = await ctx.storage.createInstance({ instanceId: id, workflowName: WORKFLOW, sourceHash: SOURCE_HASH, ownerService: "svc", inputData: '{"order":"other"}' });
      expect(again.created).toBe(false);
      expect(again.instance.inputData).toBe('{"order":"o-1"}');
      expect(await ctx.storage.getInstance(id)).toEqual(first.instance);
      expect(await ctx.storage.getInstance(uid("missing"))).toBeNull();
    });

    it("lists instances newest first with a keyset cursor, ties broken by id, and filters", async () => {
      const workflow = uid("list");
      await ctx.storage.upsertWorkflowDefinition(workflow, SOURCE_HASH, "src");
      // Five created in one transaction share started_at (now()): the cursor must still page exactly.
      const tied = await ctx.storage.transaction(async (tx) => {
        const out: string[] = [];
        for (let i = 0; i < 5; i++) out.push((await newInstance(tx, { workflowName: workflow })).instanceId);
        return out;
      });
      const later = [];
      for (let i = 0; i < 3; i++) later.push((await newInstance(ctx.storage, { workflowName: workflow })).instanceId);
      const expected = [...later.reverse(), ...tied.sort().reverse()];

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await ctx.storage.listInstances({ workflowName: workflow, limit: 3, cursor });
        seen.push(...page.instances.map((i) => i.instanceId));
        cursor = page.nextCursor;
        pages++;
      } while (cursor);
      expect(seen).toEqual(expected);
      expect(pages).toBe(3);

      const all = await ctx.storage.listInstances({ workflowName: workflow });
      expect(all.instances).toHaveLength(8);
      expect(all.nextCursor).toBeNull();

      await ctx.storage.cancelInstance(later[0]!, "test");
      const cancelled = await ctx.storage.listInstances({ workflowName: workflow, status: ["cancelled", "completed"] });
      expect(cancelled.instances.map((i) => i.instanceId)).toEqual([later[0]]);
      const running = await ctx.storage.listInstances({ workflowName: workflow, status: "running" });
      expect(running.instances).toHaveLength(7);

      const cut = all.instances[3]!.startedAt; // a later instance's start (ms precision)
      const before = await ctx.storage.listInstances({ workflowName: workflow, startedBefore: new Date(cut.getTime() - 1) });
      const after = await ctx.storage.listInstances({ workflowName: workflow, startedAfter: new Date(cut.getTime() + 1) });
      expect(before.instances.every((i) => i.startedAt.getTime() < cut.getTime())).toBe(true);
      expect(after.instances.every((i) => i.startedAt.getTime() > cut.getTime())).toBe(true);
      expect(before.instances.length + after.instances.length).toBeLessThan(8);

      expect((await ctx.storage.listInstances({ workflowName: workflow, limit: 0 })).instances).toHaveLength(1);
      expect((await ctx.storage.listInstances({ workflowName: workflow, limit: 5000 })).instances).toHaveLength(8);
      await expect(ctx.storage.listInstances({ cursor: "not-a-cursor" })).rejects.toBeInstanceOf(ValidationError);
    });
  });

  describe("cancellation", () => {
    it("returns null for an unknown instance", async () => {
      expect(await ctx.storage.cancelInstance(uid("missing"), "test")).toBeNull();
    });

    it("cancels directly without compensations: lock released, token bumped, timers/subscriptions/groups removed", async () => {
      const inst = await newInstance(ctx.storage);
      // A step ran and released its lease (nothing in flight).
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w1", 30))!;
      expect(await ctx.storage.releaseLease(lease.fence)).toBe(true);
      await ctx.storage.registerTimer(inst.instanceId, { timerId: "t", activityId: "sleep:1", delaySeconds: 3600 });
      await ctx.storage.subscribe(inst.instanceId, uid("ch"), "broadcast");
      await ctx.storage.joinGroup(inst.instanceId, uid("g"));

      const res = await ctx.storage.cancelInstance(inst.instanceId, "alice");
      expect(res).toEqual({ ok: true, status: "cancelled", previousStatus: "running" });
      const after = (await ctx.storage.getInstance(inst.instanceId))!;
      expect(after).toMatchObject({ status: "cancelled", lockedBy: null, lockExpiresAt: null, lockToken: lease.fence.token + 2 });
      const data = JSON.parse(after.cancelData!) as Record<string, unknown>;
      expect(data).toMatchObject({ cancelled_by: "alice", previous_status: "running" });
      expect(Number.isNaN(Date.parse(String(data.cancelled_at)))).toBe(false);
      for (const table of ["workflow_timer_subscriptions", "channel_subscriptions", "workflow_group_memberships"]) {
        expect(await count(ctx.database, sql`SELECT 1 FROM ${sql.raw(table)} WHERE instance_id = ${inst.instanceId}`)).toBe(0);
      }
    });

    it("cancels an instance whose step is in flight: compensating (it may have registered some), that step commits nothing", async () => {
      const inst = await newInstance(ctx.storage);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w1", 30))!;
      expect(await ctx.storage.cancelInstance(inst.instanceId, "alice")).toEqual({ ok: true, status: "compensating", previousStatus: "running" });
      const concluded = await ctx.storage.concludeStep(lease.fence, { status: "completed", outputData: "1", history: [{ activityId: "a:1", eventType: "ActivityCompleted", data: json(1) }] });
      expect(concluded.ok).toBe(false);
      expect(await ctx.storage.loadHistory(inst.instanceId)).toEqual([]);
      expect((await ctx.storage.getInstance(inst.instanceId))!).toMatchObject({ status: "compensating", lockedBy: "ended:w1", lockToken: lease.fence.token + 1 });
    });

    it("goes to compensating when compensations exist, clearing timers and the wait but keeping the subscription", async () => {
      const inst = await newInstance(ctx.storage);
      const channel = uid("ch");
      await ctx.storage.addCompensations(inst.instanceId, [{ activityId: "reserve:1", activityName: "release", args: "[1]" }]);
      await ctx.storage.subscribe(inst.instanceId, channel, "competing");
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w1", 30))!;
      await ctx.storage.setWaiting(inst.instanceId, channel, "receive_x:1", new Date(Date.now() + 60_000));
      await ctx.storage.concludeStep(lease.fence, { status: "waiting_for_message", currentActivityId: "receive_x:1", timer: { timerId: "t", activityId: "t:1", delaySeconds: 60 } });

      const res = await ctx.storage.cancelInstance(inst.instanceId, "bob");
      expect(res).toEqual({ ok: true, status: "compensating", previousStatus: "waiting_for_message" });
      const sub = (await ctx.storage.getSubscription(inst.instanceId, channel))!;
      expect(sub.activityId).toBeNull();
      expect(sub.timeoutAt).toBeNull();
      expect(await count(ctx.database, sql`SELECT 1 FROM workflow_timer_subscriptions WHERE instance_id = ${inst.instanceId}`)).toBe(0);
      expect(JSON.parse((await ctx.storage.getInstance(inst.instanceId))!.cancelData!)).toMatchObject({ previous_status: "waiting_for_message" });
      // compensating is runnable: the engine can take the lease to run compensations
      expect(await ctx.storage.acquireLease(inst.instanceId, "w2", 30)).not.toBeNull();
    });

    it("refuses to cancel a finished instance and reports its status", async () => {
      const inst = await newInstance(ctx.storage);
      const lease = (await ctx.storage.acquireLease(inst.instanceId, "w1", 30))!;
      await ctx.storage.concludeStep(lease.fence, { status: "completed", outputData: "{}" });
      expect(await ctx.storage.cancelInstance(inst.instanceId, "x")).toEqual({ ok: false, status: "completed", previousStatus: "completed" });
      expect(await ctx.storage.cancelInstance(inst.instanceId, "x")).toEqual({ ok: false, status: "completed", previousStatus: "completed" });
      const compensating = await newInstance(ctx.storage);
      await ctx.storage.addCompensations(compensating.instanceId, [{ activityId: "a:1", activityName: "undo", args: "[]" }]);
      await ctx.storage.cancelInstance(compensating.instanceId, "x");
      expect(await ctx.storage.cancelInstance(compensating.instanceId, "x")).toEqual({ ok: false, status: "compensating", previousStatus: "compensating" });
    });
  });

  describe("CloudEvents dedupe", () => {
    it("records (source, id) once", async () => {
      const id = uid("ce");
      expect(await ctx.storage.recordCloudEvent("https://src.example/a", id)).toBe(true);
      expect(await ctx.storage.recordCloudEvent("https://src.example/a", id)).toBe(false);
      expect(await ctx.storage.recordCloudEvent("https://src.example/b", id)).toBe(true);
    });
  });
}

