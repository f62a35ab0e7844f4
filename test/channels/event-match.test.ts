// waitEvent's `match` and lookback: a payment for order A never wakes the
// workflow of order B, events that arrived after the start but before the wait
// are found, one event satisfies every matching waiter, and several engines
// racing publishes against waits lose nothing — on PGlite and real Postgres.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep, waitEvent, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { paymentWait } from "../../functions/workflows/payment-wait.ts";
import { freshPostgres, makeTestApp, openTestDatabase, type DriverKind, type TestApp } from "../support/engine.ts";

/** Sleeps first, so events can arrive after the start and before the wait. */
const lateWaiter = workflow("em_late_waiter", async (ctx, input: { orderId: string; sleepSeconds: number; timeoutSeconds: number }) => {
  await sleep(ctx, input.sleepSeconds);
  try {
    const e = await waitEvent(ctx, "em.paid", { match: { "data.orderId": input.orderId }, timeoutSeconds: input.timeoutSeconds });
    return { id: e.id, data: e.data };
  } catch (err) {
    return (err as Error).name;
  }
});
/** Two waits on one type with different matches, in order. */
const twoOrders = workflow("em_two_orders", async (ctx, input: { first: string; second: string }) => {
  const a = await waitEvent(ctx, "em.paid", { match: { "data.orderId": input.first }, timeoutSeconds: 30 });
  const b = await waitEvent(ctx, "em.paid", { match: { "data.orderId": input.second }, timeoutSeconds: 30 });
  return [a.id, b.id];
});
const bySubject = workflow("em_by_subject", async (ctx, subject: string) => (await waitEvent(ctx, "em.shipped", { match: { subject }, timeoutSeconds: 30 })).id);

const workflows = [paymentWait, lateWaiter, twoOrders, bySubject];

function event(type: string, id: string, data: unknown, extra: Record<string, unknown> = {}) {
  return { specversion: "1.0", type, source: "/test/em", id, data, ...extra };
}

describe.each<DriverKind>(["pglite", "postgres-js"])("event matching on %s", (kind) => {
  let t: TestApp;
  const send = async (body: unknown) => {
    const res = await t.edda.app.request("/events", { method: "POST", headers: { "content-type": "application/cloudevents+json" }, body: JSON.stringify(body) });
    expect(res.status).toBe(202);
  };
  beforeAll(async () => {
    t = makeTestApp(await openTestDatabase(kind, `event_match_${kind}`), { workflows });
  });
  afterAll(async () => {
    await t.edda.close();
  });

  it("payment_wait: the payment of order A completes A only; B keeps waiting until its own", async () => {
    const a = await t.edda.start(paymentWait, { orderId: `A-${kind}` });
    const b = await t.edda.start(paymentWait, { orderId: `B-${kind}` });
    for (const w of [a, b]) await t.waitFor(w.instanceId, ["waiting_for_message"]);
    await send(event("payment.completed", `pa-${kind}`, { orderId: `A-${kind}`, amount: 10 }));
    expect((await t.waitFor(a.instanceId)).output).toEqual({ orderId: `A-${kind}`, amount: 10 });
    await t.edda.sweep();
    expect((await t.edda.getInstance(b.instanceId))!.status).toBe("waiting_for_message");
    await send(event("payment.completed", `pb-${kind}`, { orderId: `B-${kind}`, amount: 20 }));
    expect((await t.waitFor(b.instanceId)).output).toEqual({ orderId: `B-${kind}`, amount: 20 });
  });

  it("lookback: an event after the start and before the wait is received; one before the start is not", async () => {
    const order = `L-${kind}`;
    await send(event("em.paid", `before-${kind}`, { orderId: order, n: 0 }));
    const { instanceId } = await t.edda.start(lateWaiter, { orderId: order, sleepSeconds: 1, timeoutSeconds: 30 });
    await t.waitFor(instanceId, ["waiting_for_timer"]);
    await send(event("em.paid", `during-${kind}`, { orderId: order, n: 1 }));
    const done = await t.waitFor(instanceId);
    expect(done.output).toEqual({ id: `during-${kind}`, data: { orderId: order, n: 1 } });
  });

  it("lookback ignores events of other orders; with none of its own the wait times out", async () => {
    const { instanceId } = await t.edda.start(lateWaiter, { orderId: `T-${kind}`, sleepSeconds: 0.5, timeoutSeconds: 0.5 });
    await send(event("em.paid", `other-${kind}`, { orderId: `U-${kind}` }));
    expect((await t.waitFor(instanceId)).output).toBe("EventTimeoutError");
  });

  it("one event satisfies every matching waiter; a waiter of another subject stays", async () => {
    const subject = `ship-${kind}`;
    const waiters = await Promise.all([1, 2, 3].map(() => t.edda.start(bySubject, subject)));
    const other = await t.edda.start(bySubject, `other-${subject}`);
    for (const w of [...waiters, other]) await t.waitFor(w.instanceId, ["waiting_for_message"]);
    await send(event("em.shipped", `sh-${kind}`, null, { subject }));
    for (const w of waiters) expect((await t.waitFor(w.instanceId)).output).toBe(`sh-${kind}`);
    await t.edda.sweep();
    expect((await t.edda.getInstance(other.instanceId))!.status).toBe("waiting_for_message");
    await t.edda.cancel(other.instanceId);
  });

  it("two waits with different matches: the second order's event, arrived first, is not lost; none is received twice", async () => {
    const [x, y] = [`X-${kind}`, `Y-${kind}`];
    const { instanceId } = await t.edda.start(twoOrders, { first: x, second: y });
    await t.waitFor(instanceId, ["waiting_for_message"]);
    await send(event("em.paid", `y-${kind}`, { orderId: y }));
    await send(event("em.paid", `x-${kind}`, { orderId: x }));
    expect((await t.waitFor(instanceId)).output).toEqual([`x-${kind}`, `y-${kind}`]);
    const receipts = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM channel_message_receipts WHERE instance_id = ${instanceId}`);
    expect(receipts[0]!.n).toBe(2);
  });

  it("a bad match fails the waiting workflow with a TypeError naming the key; valid traffic still flows", async () => {
    const bad = workflow("em_bad_match", async (ctx) => waitEvent(ctx, "em.paid", { match: { "Not A Key": 1 } }));
    const app = makeTestApp(t.database, { workflows: [bad, paymentWait] });
    const { instanceId } = await app.edda.start(bad, null);
    const done = await app.waitFor(instanceId);
    expect(done.status).toBe("failed");
    expect(JSON.stringify(done.error)).toContain("Not A Key");
    const ok = await app.edda.start(paymentWait, { orderId: `ok-${kind}` });
    await app.waitFor(ok.instanceId, ["waiting_for_message"]);
    await send(event("payment.completed", `ok-${kind}`, { orderId: `ok-${kind}`, amount: 1 }));
    expect((await app.waitFor(ok.instanceId)).status).toBe("completed");
  });
});

describe("event matching with several engines on real Postgres", () => {
  const apps: TestApp[] = [];
  beforeAll(async () => {
    const pg = await freshPostgres("event_match_engines");
    for (let i = 0; i < 3; i++) apps.push(makeTestApp(pg.open(), { workflows }));
  });
  afterAll(async () => {
    for (const a of apps) await a.edda.close();
  });

  it("30 orders, payments published from three engines while the waits are registered: each order gets its own, exactly once", async () => {
    const n = 30;
    const orders = Array.from({ length: n }, (_, i) => `R${i}`);
    // Half wait at once, half sleep first (their payment lands before the wait: lookback).
    const started = await Promise.all(orders.map((o, i) => apps[i % 3]!.edda.start(lateWaiter, { orderId: o, sleepSeconds: i % 2 ? 0.3 : 0.001, timeoutSeconds: 30 })));
    const sweeping = apps.map(async (a) => {
      for (let k = 0; k < 20; k++) {
        await a.edda.sweep();
        await new Promise((r) => setTimeout(r, 50));
      }
    });
    await Promise.all(
      orders.map(async (o, i) => {
        await new Promise((r) => setTimeout(r, (i * 17) % 200));
        const res = await apps[(i + 1) % 3]!.edda.app.request("/events", {
          method: "POST",
          headers: { "content-type": "application/cloudevents+json" },
          body: JSON.stringify(event("em.paid", `race-${o}`, { orderId: o })),
        });
        expect(res.status).toBe(202);
      }),
    );
    await Promise.all(sweeping);
    for (const [i, s] of started.entries()) {
      const done = await apps[i % 3]!.waitFor(s.instanceId, ["completed", "failed"], 30_000);
      expect(done.output).toEqual({ id: `race-${orders[i]}`, data: { orderId: orders[i] } });
    }
  });

  it("the match is answered by the GIN index on the message document", async () => {
    const db = apps[0]!.database.db;
    const plan = await queryRows<Record<string, string>>(
      db,
      sql`EXPLAIN (FORMAT TEXT) SELECT id FROM channel_messages m
          WHERE edda_message_doc(m.data_type, m.data, m.metadata) @> '{"data":{"orderId":"R1"}}'::jsonb`,
    );
    const text = plan.map((r) => Object.values(r)[0]).join("\n");
    // A bitmap scan on the index whatever the table size (the planner may still pick it on a small table; force it off seqscan).
    expect(text.includes("idx_channel_messages_doc") || (await forcedPlan(db)).includes("idx_channel_messages_doc")).toBe(true);
  });
});

async function forcedPlan(db: Parameters<typeof queryRows>[0]): Promise<string> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`SET LOCAL enable_seqscan = off`);
    const plan = await queryRows<Record<string, string>>(
      tx,
      sql`EXPLAIN (FORMAT TEXT) SELECT id FROM channel_messages m WHERE edda_message_doc(m.data_type, m.data, m.metadata) @> '{"data":{"orderId":"R1"}}'::jsonb`,
    );
    return plan.map((r) => Object.values(r)[0]).join("\n");
  });
}
