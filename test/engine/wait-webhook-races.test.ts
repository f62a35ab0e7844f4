// A per-wait webhook as a race branch (onWebhook), on real Postgres through
// app.request(): each branch winning — the POST, a timer, a message, a
// CloudEvent, the hook's own expiry, a POST that came before the race — with
// the losers withdrawn (no timer row, no waiting subscription, a losing
// hook's URL 410 `lost` and shown cancelled, a losing message kept for the
// next receive), and 16 concurrent POSTs on two engines against a timer due
// at the same moment: one record, one winner, one wake.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEdda, engineOf, type Edda } from "../../src/edda.ts";
import { LocalDispatcher } from "../../src/engine/dispatcher.ts";
import { activity, createWebhook, onEvent, onMessage, onTimer, onTimerUntil, onWebhook, race, waitMessage, workflow, WebhookExpiredError, type WebhookDelivery } from "../../src/index.ts";
import { webhookToken } from "../../src/core/webhook-waits.ts";
import { queryRows } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

/** What ran after each instance's race, per instance: a second wake would run it twice. */
const afterRuns = new Map<string, number>();
const after = activity(
  "whr_after",
  async (ctx, winner: string) => {
    afterRuns.set(ctx.instanceId, (afterRuns.get(ctx.instanceId) ?? 0) + 1);
    return winner;
  },
  { transactional: false },
);

const valueOf = (v: unknown): unknown => (v && typeof v === "object" ? ((v as WebhookDelivery).body ?? (v as { data?: unknown }).data ?? null) : null);

/** Approval link vs a deadline, and optionally vs a reply on a channel: what won, with what, and what a later wait on the hook gets. */
const approval = workflow("whr_approval", async (ctx, input: { timer: number; reply?: boolean; expiresIn?: number; thenWaitReply?: boolean; hold?: boolean }) => {
  const hook = await createWebhook(ctx, input.expiresIn ? { expiresIn: input.expiresIn } : {});
  try {
    const r = await race(ctx, { approved: onWebhook(hook), ...(input.reply ? { reply: onMessage("reply") } : {}), late: onTimer(input.timer) });
    await after(ctx, r.winner);
    // Alive after the race (an ended instance's hooks answer 410 `finished`): until released.
    if (input.hold) await waitMessage(ctx, "release", { timeoutSeconds: 60 });
    const next = input.thenWaitReply ? (await waitMessage(ctx, "reply", { timeoutSeconds: 30 })).data : null;
    return { winner: r.winner, value: valueOf(r.value), next };
  } catch (e) {
    if (!(e instanceof WebhookExpiredError)) throw e;
    // After the race, a wait on a hook whose race was decided gets nothing.
    return { winner: "expired", value: null, next: null };
  }
});

const onDecision = workflow("whr_event", async (ctx) => {
  const hook = await createWebhook(ctx);
  const r = await race(ctx, { approved: onWebhook(hook), decided: onEvent("whr.decided"), late: onTimer(3600) });
  const later = await hook.wait().then(
    () => "delivered",
    (e: Error) => e.name,
  );
  return { winner: r.winner, value: valueOf(r.value), later };
});

const contest = workflow("whr_contest", async (ctx, at: string) => {
  const hook = await createWebhook(ctx);
  const r = await race(ctx, { hook: onWebhook(hook), late: onTimerUntil(new Date(at)) });
  await after(ctx, r.winner);
  return { winner: r.winner, value: valueOf(r.value) };
});

const workflows = [approval, onDecision, contest];
let db: Awaited<ReturnType<typeof freshPostgres>>;
let t: TestApp;
const post = async (app: Edda, path: string, body: unknown): Promise<Response> =>
  app.app.request(`http://localhost${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
const rows = <T>(q: ReturnType<typeof sql>) => queryRows<T>(t.database.db, q);

/** The instance's hook URL path, derived as its workflow derives it (the token is stored nowhere). */
async function hookPath(instanceId: string): Promise<string> {
  const [row] = await rows<{ data: string; activity_id: string }>(sql`SELECT event_data AS data, activity_id FROM workflow_history WHERE instance_id = ${instanceId} AND event_data LIKE '%"edda.create_webhook"%'`);
  const { result } = JSON.parse(row!.data) as { result: { nonce: string } };
  return `/hooks/${await webhookToken("test-secret", instanceId, row!.activity_id, result.nonce)}`;
}

/** Until the instance, past its race, waits to be released. */
async function held(instanceId: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if ((await t.edda.getInstance(instanceId))?.currentActivityId === "receive_release:1") return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${instanceId} never reached its release wait`);
}

/** What is left of the race's wait once it was decided: timer rows, waiting subscriptions, records at its id. */
async function leftovers(instanceId: string) {
  const [r] = await rows<{ timers: number; waiting: number; records: number }>(sql`SELECT
    (SELECT count(*)::int FROM workflow_timer_subscriptions WHERE instance_id = ${instanceId}) AS timers,
    (SELECT count(*)::int FROM channel_subscriptions WHERE instance_id = ${instanceId} AND activity_id IS NOT NULL) AS waiting,
    (SELECT count(*)::int FROM workflow_history WHERE instance_id = ${instanceId} AND activity_id = 'race:1') AS records`);
  return r!;
}

beforeAll(async () => {
  db = await freshPostgres("wait_webhook_races");
  t = makeTestApp(db.open(), { workflows });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("race with a webhook branch", () => {
  it("the POST wins against a timer: the timer row goes with it, a second POST is 410 fired", async () => {
    await t.edda.start(approval, { timer: 3600 }, { instanceId: "whr-post" });
    await t.waitFor("whr-post", ["waiting_for_webhook"]);
    expect(await leftovers("whr-post")).toMatchObject({ timers: 1, records: 0 });
    // The viewer's "now" says the race waits for the POST, and for its timer.
    const page = await (await t.edda.app.request("http://localhost/ui/instances/whr-post")).text();
    expect(page).toContain("a POST to its webhook URL");
    expect(page).toContain("timer race:1");
    const path = await hookPath("whr-post");
    expect((await post(t.edda, path, { ok: 1 })).status).toBe(202);
    expect((await t.waitFor("whr-post")).output).toEqual({ winner: "approved", value: { ok: 1 }, next: null });
    expect(await leftovers("whr-post")).toEqual({ timers: 0, waiting: 0, records: 1 });
    const again = await post(t.edda, path, { ok: 2 });
    expect(again.status).toBe(410);
    expect(await again.json()).toMatchObject({ reason: "fired" });
  });

  it("the timer wins: the hook's URL then answers 410 lost, and the view shows the hook cancelled", async () => {
    await t.edda.start(approval, { timer: 0.3, hold: true }, { instanceId: "whr-timer" });
    await held("whr-timer");
    const late = await post(t.edda, await hookPath("whr-timer"), { ok: 1 });
    expect(late.status).toBe(410);
    expect(await late.json()).toMatchObject({ reason: "lost", error_type: "WebhookGone" });
    expect((await t.edda.getInstance("whr-timer"))!.webhooks).toMatchObject([{ id: "webhook:1", status: "cancelled", firedAt: null }]);
    expect(await leftovers("whr-timer")).toMatchObject({ timers: 0, records: 1 });
    expect((await t.edda.sweep()).failures).toEqual([]);
    await t.edda.publish("release", null, { targetInstanceId: "whr-timer" });
    expect((await t.waitFor("whr-timer")).output).toEqual({ winner: "late", value: null, next: null });
    expect(afterRuns.get("whr-timer")).toBe(1);
  });

  it("a message wins against the webhook: the hook is 410 lost; the POST wins against the message: the message stays for the next wait", async () => {
    await t.edda.start(approval, { timer: 3600, reply: true, hold: true }, { instanceId: "whr-msg" });
    await t.waitFor("whr-msg", ["waiting_for_message"]);
    expect(await leftovers("whr-msg")).toMatchObject({ timers: 0, waiting: 1 });
    await t.edda.publish("reply", "by mail", { targetInstanceId: "whr-msg" });
    await held("whr-msg");
    expect(await (await post(t.edda, await hookPath("whr-msg"), {})).json()).toMatchObject({ status: 410, reason: "lost" });
    await t.edda.publish("release", null, { targetInstanceId: "whr-msg" });
    expect((await t.waitFor("whr-msg")).output).toEqual({ winner: "reply", value: "by mail", next: null });

    await t.edda.start(approval, { timer: 3600, reply: true, thenWaitReply: true }, { instanceId: "whr-msg2" });
    await t.waitFor("whr-msg2", ["waiting_for_message"]);
    expect((await post(t.edda, await hookPath("whr-msg2"), { by: "link" })).status).toBe(202);
    await t.waitFor("whr-msg2", ["waiting_for_message"]);
    expect(await leftovers("whr-msg2")).toMatchObject({ records: 1 });
    await t.edda.publish("reply", "after", { targetInstanceId: "whr-msg2" });
    expect((await t.waitFor("whr-msg2")).output).toEqual({ winner: "approved", value: { by: "link" }, next: "after" });
  });

  it("a CloudEvent wins against the webhook; a later hook.wait() on the lost hook throws WebhookExpiredError", async () => {
    await t.edda.start(onDecision, null, { instanceId: "whr-ev" });
    await t.waitFor("whr-ev", ["waiting_for_message"]);
    const ce = { specversion: "1.0", type: "whr.decided", source: "test", id: "ev-1", data: { approved: false } };
    const res = await t.edda.app.request("http://localhost/events", { method: "POST", headers: { "content-type": "application/cloudevents+json" }, body: JSON.stringify(ce) });
    expect(res.status).toBe(202);
    expect((await t.waitFor("whr-ev")).output).toEqual({ winner: "decided", value: { approved: false }, later: "WebhookExpiredError" });
    expect((await post(t.edda, await hookPath("whr-ev"), {})).status).toBe(410);
  });

  it("the hook's own expiry ends the race with WebhookExpiredError (the timer was later)", async () => {
    await t.edda.start(approval, { timer: 3600, expiresIn: 0.3 }, { instanceId: "whr-exp" });
    await t.waitFor("whr-exp", ["waiting_for_webhook", "completed"]);
    await new Promise((r) => setTimeout(r, 400));
    expect((await t.edda.sweep()).failures).toEqual([]);
    expect((await t.waitFor("whr-exp")).output).toEqual({ winner: "expired", value: null, next: null });
    expect(await leftovers("whr-exp")).toEqual({ timers: 0, waiting: 0, records: 1 });
    expect(await (await post(t.edda, await hookPath("whr-exp"), {})).json()).toMatchObject({ reason: "expired" });
  });
});

describe("race with a webhook branch under concurrency", () => {
  it("two engines, 16 concurrent POSTs against a timer due at the same moment: one record, one winner, one wake — each round", async () => {
    const second = createEdda({ workflows, database: db.open(), dispatcher: new LocalDispatcher({ concurrency: 4 }), secret: "test-secret" });
    const engines = [await engineOf(t.edda), await engineOf(second)];
    const winners: string[] = [];
    try {
      for (let round = 0; round < 6; round++) {
        const id = `whr-contest-${round}`;
        const at = Date.now() + 1500;
        await t.edda.start(contest, new Date(at).toISOString(), { instanceId: id });
        await t.waitFor(id, ["waiting_for_webhook"]);
        const path = await hookPath(id);
        // Aim the POSTs around the deadline, spread a few milliseconds either side, with both engines firing due timers.
        await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now() - 8 + round * 3)));
        const [results] = await Promise.all([
          Promise.all(Array.from({ length: 16 }, (_, i) => post(i % 2 ? second : t.edda, path, { n: i }))),
          ...engines.map((e) => e.fireDueTimers()),
        ]);
        const done = await t.waitFor(id);
        const out = done.output as { winner: string; value: { n: number } | null };
        const accepted = results.map((r, i) => [r.status, i] as const).filter(([s]) => s === 202);
        expect(results.every((r) => r.status === 202 || r.status === 410)).toBe(true);
        if (out.winner === "hook") {
          expect(accepted).toHaveLength(1);
          expect(out.value).toEqual({ n: accepted[0]![1] });
        } else {
          expect(out.winner).toBe("late");
          expect(accepted).toHaveLength(0);
        }
        expect(await leftovers(id)).toEqual({ timers: 0, waiting: 0, records: 1 });
        expect(afterRuns.get(id)).toBe(1);
        winners.push(out.winner);
      }
    } finally {
      await second.close();
    }
    console.log(`webhook vs timer at the same moment, 6 rounds: winners ${winners.join(", ")}`);
  }, 60_000);
});
