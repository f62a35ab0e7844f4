// Regression tests for workflow shapes that broke the replay core, on all
// three drivers:
// - `Promise.all([activity, sleep])` (and receive / waitEvent beside an
//   activity) failed with NonDeterminismError on the in-memory continuation
//   while a cold replay waited correctly;
// - channels named with `#`, `:` or unicode collided with internal id
//   suffixes (`id#n` attempt rows) and hung the instance in `running`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, publish, receive, sendTo, sleep, subscribe, waitEvent, waitMessage, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type DriverKind, type TestApp } from "../support/engine.ts";

const charge = activity("shape_charge", async (_ctx, n: number) => `charged ${n}`);

const chargeAndSleep = workflow("shape_charge_sleep", async (ctx) => Promise.all([charge(ctx, 1), sleep(ctx, 0.05)]));
const chargeAndReceive = workflow("shape_charge_receive", async (ctx) => {
  const [c, m] = await Promise.all([charge(ctx, 2), waitMessage<string>(ctx, "shape_inbox")]);
  return { c, m: m.data };
});
const chargeAndEvent = workflow("shape_charge_event", async (ctx, type: string) => {
  const [c, e] = await Promise.all([charge(ctx, 3), waitEvent(ctx, type, { timeoutSeconds: 30 })]);
  return { c, e: e.data };
});
const oddChannel = workflow("shape_odd_channel", async (ctx, channel: string) => {
  await subscribe(ctx, channel, "broadcast");
  const first = await receive<string>(ctx, channel, { timeoutSeconds: 30 });
  const second = await receive<string>(ctx, channel, { timeoutSeconds: 30 });
  return [first.data, second.data];
});
const explicitIds = workflow("shape_explicit_ids", async (ctx) => [await charge.withId("pay#1")(ctx, 4), await charge.withId("a:b")(ctx, 5)]);

const ODD_CHANNELS = ["orders#eu", "a:b", "ünïcødé 🚀", "x%23y", "x#y", "retry#retry1", "50%"];

describe.each<DriverKind>(["pglite", "postgres-js", "neon"])("replay shapes on %s", (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = makeTestApp(await openTestDatabase(kind, `shapes_${kind}`), {
      workflows: [chargeAndSleep, chargeAndReceive, chargeAndEvent, oddChannel, explicitIds],
    });
  });
  afterAll(async () => {
    await t.edda.close();
  });

  it("Promise.all([activity, sleep]) completes (the in-memory continuation keeps the open timer)", async () => {
    const { instanceId } = await t.edda.start(chargeAndSleep, null);
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual(["charged 1", null]);
  });

  it("Promise.all([activity, waitMessage]) completes when the message arrives", async () => {
    const { instanceId } = await t.edda.start(chargeAndReceive, null);
    await t.waitFor(instanceId, ["waiting_for_message"]);
    await sendTo(t.edda, instanceId, "shape_inbox", "hello");
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ c: "charged 2", m: "hello" });
  });

  it("Promise.all([activity, waitEvent]) completes when the event arrives", async () => {
    const type = `shape.event.${kind}`;
    const { instanceId } = await t.edda.start(chargeAndEvent, type);
    await t.waitFor(instanceId, ["waiting_for_message"]);
    await publish(t.edda, type, { ok: true });
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ c: "charged 3", e: { ok: true } });
  });

  it("channels named with #, :, % or unicode receive every message, with escaped ids", async () => {
    const started = await Promise.all(ODD_CHANNELS.map((ch) => t.edda.start(oddChannel, ch)));
    for (const s of started) await t.waitFor(s.instanceId, ["waiting_for_message"]);
    for (const ch of ODD_CHANNELS) {
      await publish(t.edda, ch, `${ch}/1`);
      await publish(t.edda, ch, `${ch}/2`);
    }
    for (const [i, s] of started.entries()) {
      const done = await t.waitFor(s.instanceId);
      const ch = ODD_CHANNELS[i]!;
      expect(done.status, ch).toBe("completed");
      expect(done.output, ch).toEqual([`${ch}/1`, `${ch}/2`]);
      const ids = (done.history as { activityId: string }[]).map((h) => h.activityId);
      // No raw '#' or ':' from the channel name reaches an id: only the counter's ':'.
      for (const id of ids) expect(id.split(":").length, id).toBe(2);
      expect(ids.some((id) => id.includes("#")), ids.join()).toBe(false);
    }
    const ids = (started: { instanceId: string }) => t.edda.getInstance(started.instanceId, { history: true });
    const first = (await ids(started[0]!))!.history as { activityId: string }[];
    expect(first.map((h) => h.activityId)).toEqual(["subscribe_orders%23eu:1", "receive_orders%23eu:1", "receive_orders%23eu:2"]);
  });

  it("explicit ids with reserved characters are escaped, never taken for attempt rows", async () => {
    const { instanceId } = await t.edda.start(explicitIds, null);
    const done = await t.waitFor(instanceId);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual(["charged 4", "charged 5"]);
    expect((done.history as { activityId: string }[]).map((h) => h.activityId)).toEqual(["pay%231", "a%3Ab"]);
  });
});
