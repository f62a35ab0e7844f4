// The kit's own tests as plain cases (node:assert), so the same bodies run
// under vitest (kit.test.ts), `node --test` (kit.node.ts) and `deno test`
// (kit.deno.ts). Each case opens its own kit: test time is per kit.
import assert from "node:assert/strict";
import { activity, sleep, ValidationError, waitMessage, workflow } from "../../src/index.ts";
import { createTestEdda, verifyReplay, type TestEddaOptions } from "../../src/testing/index.ts";
import type { Workflow } from "../../src/index.ts";
import { charge, DAY, escalate, expenseApproval, hourlyRollup, partnerSync, payment, remind } from "./flows.ts";

export interface KitCase {
  name: string;
  run(): Promise<void>;
}

const START = "2030-01-01T00:30:00.000Z";
const at = (seconds: number) => new Date(Date.parse(START) + seconds * 1000).toISOString();

/** Runs `body` on a fresh kit and closes it whatever happens. */
async function withKit<const W extends Workflow>(opts: TestEddaOptions<W>, body: (t: Awaited<ReturnType<typeof createTestEdda<W>>>) => Promise<void>): Promise<void> {
  const t = await createTestEdda(opts);
  try {
    await body(t);
  } finally {
    await t.close();
  }
}

/** The approval's doubles: what each reminder and escalation was asked, in order. */
function recordApprovalSideEffects(t: { replaceActivity: Awaited<ReturnType<typeof createTestEdda>>["replaceActivity"] }) {
  const reminders: { to: string; day: number; at: string }[] = [];
  const escalations: string[] = [];
  t.replaceActivity(remind, async (_ctx, to, day, when) => {
    reminders.push({ to, day, at: when });
    return { sent: true };
  });
  t.replaceActivity(escalate, async (_ctx, _id, to) => {
    escalations.push(to);
    return { escalated: true };
  });
  return { reminders, escalations };
}

/** Sleeps an hour, then waits for a message: what t.why says at each stage. */
const napThenWait = workflow("kit_why_nap", async (ctx) => {
  await sleep(ctx, 3600);
  return (await waitMessage<string>(ctx, "kit-why-go")).data;
});

export function kitCases(database?: () => Promise<string>): KitCase[] {
  const db = async () => (database ? { database: await database() } : {});
  return [
    {
      name: "t.why says why an instance is not moving, in test time: the timer until its expiry, then the message wait, then none",
      run: async () =>
        withKit({ workflows: [napThenWait], startAt: START, ...(await db()) }, async (t) => {
          const run = await t.start(napThenWait, undefined);
          const sleeping = await t.why(run);
          assert.equal(sleeping.status, "waiting_for_timer");
          assert.equal(sleeping.reason.kind, "timer");
          assert.equal(sleeping.reason.until, at(3600));
          assert.match(sleeping.reason.detail, /^sleeping at sleep:1 until 2030-01-01T01:30:00\.000Z \(in 60 min\)/);
          await t.advance("1h");
          const waiting = await t.why(run);
          assert.equal(waiting.reason.kind, "message");
          if (waiting.reason.kind !== "message") return;
          assert.equal(waiting.reason.facts.channel, "kit-why-go");
          assert.equal(waiting.reason.facts.lastMessage, null);
          await t.send(run, "kit-why-go", "now");
          const done = await t.why(run);
          assert.deepEqual([done.status, done.reason.kind], ["completed", "none"]);
          await assert.rejects(t.why("no-such-instance"), /no instance "no-such-instance"/);
        }),
    },
    {
      name: "a 30-day approval with daily reminders and a 7-day escalation runs its whole month in test time",
      run: async () =>
        withKit({ workflows: [expenseApproval], startAt: START, ...(await db()) }, async (t) => {
          const side = recordApprovalSideEffects(t);
          const started = await t.start(expenseApproval, { requestId: "exp-1", approver: "ana", manager: "mo" });
          assert.equal((await t.result(started)).status, "waiting_for_message");
          const wall = performance.now();
          await t.advance("30d");
          const ms = performance.now() - wall;
          console.log(`kit: advance("30d") through 30 receive timeouts, 29 reminders and an escalation took ${ms.toFixed(0)} ms of wall time`);
          const r = await t.result(started);
          assert.equal(r.status, "completed");
          assert.deepEqual(r.output, { status: "expired", by: null, day: 30 });
          // One reminder a day, at test time (ctx.now()), to the approver and from day 7 to the manager.
          assert.equal(side.reminders.length, 29);
          assert.deepEqual(
            side.reminders.map((x) => x.day),
            Array.from({ length: 29 }, (_, i) => i + 1),
          );
          for (const x of side.reminders) {
            assert.equal(x.at, at(x.day * DAY));
            assert.equal(x.to, x.day < 7 ? "ana" : "mo");
          }
          assert.deepEqual(side.escalations, ["mo"]);
          assert.equal(t.now.toISOString(), at(30 * DAY));
          // The doubles' results are recorded under the activities' names, as the real ones would be.
          const history = await t.history(started);
          const reminded = history.filter((e) => e.eventType === "ActivityCompleted" && e.activityId.startsWith("kit_remind:"));
          assert.equal(reminded.length, 29);
          assert.deepEqual(reminded[0]!.data, { name: "kit_remind", result: { sent: true } });
          assert.equal(history.filter((e) => e.eventType === "MessageTimeout").length, 30);
        }),
    },
    {
      name: "a decision sent on day 10 reaches the manager's wait and ends the approval",
      run: async () =>
        withKit({ workflows: [expenseApproval], startAt: START, ...(await db()) }, async (t) => {
          const side = recordApprovalSideEffects(t);
          const started = await t.start(expenseApproval, { requestId: "exp-2", approver: "ana", manager: "mo" });
          await t.advance("9d12h");
          assert.equal(side.reminders.length, 9);
          await t.send(started, "decision", { approved: true, by: "mo" });
          const r = await t.result(started);
          assert.equal(r.status, "completed");
          assert.deepEqual(r.output, { status: "approved", by: "mo", day: 10 });
          await t.advance("30d");
          assert.equal(side.reminders.length, 9, "a finished approval sends no more reminders");
        }),
    },
    {
      name: "retries back off an hour each: nothing happens at 59 minutes, the next attempt at 60",
      run: async () =>
        withKit({ workflows: [payment], startAt: START, ...(await db()) }, async (t) => {
          const attempts: { attempt: number; at: string }[] = [];
          t.replaceActivity(charge, async (ctx) => {
            attempts.push({ attempt: ctx.attempt, at: t.now.toISOString() });
            if (ctx.attempt < 3) throw new Error(`partner down (attempt ${ctx.attempt})`);
            return { receipt: `r-${ctx.attempt}` };
          });
          const p = await t.start(payment, { orderId: "o-1" });
          assert.equal((await t.result(p)).status, "waiting_for_timer");
          await t.advance("59m");
          assert.equal(attempts.length, 1);
          await t.advance("1m");
          assert.equal(attempts.length, 2);
          assert.equal((await t.result(p)).status, "waiting_for_timer");
          await t.advance("1h");
          const r = await t.result(p);
          assert.equal(r.status, "completed");
          assert.deepEqual(r.output, { orderId: "o-1", receipt: "r-3" });
          assert.deepEqual(attempts, [
            { attempt: 1, at: at(0) },
            { attempt: 2, at: at(3600) },
            { attempt: 3, at: at(7200) },
          ]);
          const failed = (await t.history(p)).filter((e) => e.eventType === "ActivityAttemptFailed");
          assert.equal(failed.length, 2);
        }),
    },
    {
      name: "an hourly schedule over a simulated day starts 24 instances, one per tick",
      run: async () =>
        withKit({ workflows: [hourlyRollup], startAt: START, ...(await db()) }, async (t) => {
          await t.advance("24h");
          const hours: string[] = [];
          for (let h = 1; h <= 24; h++) hours.push(at(h * 3600 - 1800).slice(0, 13));
          const ids = hours.map((h) => `schedule:kit_hourly_rollup:${h}:00:00.000Z`);
          const outputs: unknown[] = [];
          for (const id of ids) {
            const r = await t.result(id);
            assert.equal(r.status, "completed", id);
            outputs.push(r.output);
          }
          assert.deepEqual(
            outputs,
            hours.map((hour) => ({ hour })),
          );
          const page = await t.instances({ workflowName: "kit_hourly_rollup" });
          assert.equal(page.length, 24);
        }),
    },
    {
      name: "a rate limit of 2 a minute admits queued starts as its window makes room",
      run: async () =>
        withKit({ workflows: [partnerSync], startAt: START, ...(await db()) }, async (t) => {
          const ids: string[] = [];
          // Starts in one instant of test time queue in instance-id order (their start times tie).
          for (let i = 0; i < 5; i++) ids.push((await t.start(partnerSync, { account: `a${i}` }, { instanceId: `sync-${i}` })).instanceId);
          const statuses = async () => Promise.all(ids.map(async (id) => (await t.result(id)).status));
          assert.deepEqual(await statuses(), ["completed", "completed", "queued", "queued", "queued"]);
          await t.advance("59s");
          assert.deepEqual(await statuses(), ["completed", "completed", "queued", "queued", "queued"]);
          await t.advance("1s");
          assert.deepEqual(await statuses(), ["completed", "completed", "completed", "completed", "queued"]);
          await t.advance("1m");
          assert.deepEqual(await statuses(), ["completed", "completed", "completed", "completed", "completed"]);
          const ats = await Promise.all(ids.map(async (id) => ((await t.result(id)).output as { at: string }).at));
          assert.deepEqual(ats, [at(0), at(0), at(60), at(60), at(120)]);
        }),
    },
    {
      name: "captured histories replay against the same code and diverge against a changed one",
      run: async () =>
        withKit({ workflows: [payment], startAt: START, ...(await db()) }, async (t) => {
          t.replaceActivity(charge, async () => ({ receipt: "ok" }));
          const p = await t.start(payment, { orderId: "o-2" });
          const recorded = JSON.parse(JSON.stringify(await t.capture(p))) as Awaited<ReturnType<typeof t.capture>>;
          const same = await t.verifyReplay([recorded]);
          assert.equal(same.ok, true);
          assert.deepEqual(same.results.map((r) => r.detail), ["complete"]);
          const refund = activity("kit_refund", async () => ({ receipt: "refund" }));
          const changed = workflow("kit_payment", async (ctx) => refund(ctx));
          const report = await verifyReplay({ workflows: [changed], histories: [recorded] });
          assert.equal(report.ok, false);
          assert.equal(report.diverging.length, 1);
          assert.match(report.diverging[0]!.detail, /kit_charge|kit_refund/);
        }),
    },
    {
      name: "bad spans and bad input are refused, and the kit goes on working",
      run: async () =>
        withKit({ workflows: [payment], startAt: START, ...(await db()) }, async (t) => {
          await assert.rejects(t.advance(-1), TypeError);
          await assert.rejects(t.advance("3 days" as never), TypeError);
          await assert.rejects(t.start(payment, { orderId: 7 } as never), ValidationError);
          assert.equal(t.now.toISOString(), START);
          t.replaceActivity(charge, async () => ({ receipt: "after" }));
          const p = await t.start(payment, { orderId: "o-3" });
          assert.deepEqual((await t.result(p)).output, { orderId: "o-3", receipt: "after" });
        }),
    },
  ];
}
