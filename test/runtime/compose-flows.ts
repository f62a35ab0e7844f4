// Compose and control on a real platform: child workflows, a matched
// waitEvent, a concurrency key draining, workflow and activity timeouts and
// a schedule tick, each through the platform's own transport (Queues in
// workerd, the KV queue in Deno) and its own cron (the Workers scheduled
// handler, Deno.cron). Shared by worker-queue.test.ts and deno.test.ts, on
// the wrangler / Deno process those files already run.
import { sql } from "drizzle-orm";
import Stripe from "stripe";
import { expect, it } from "vitest";
import { workflows } from "../../functions/workflows/index.ts";
import { createEdda } from "../../src/edda.ts";
import { LocalDispatcher } from "../../src/engine/dispatcher.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { api, waitForStatus } from "./processes.ts";

/** EDDA_WEBHOOK_STRIPE_SECRET of the platform processes that run these flows. */
export const STRIPE_WEBHOOK_SECRET = "whsec_runtime_flows";

export interface ComposePlatform {
  /** Prefix of the instance ids this file creates. */
  prefix: string;
  base(): string;
  db(): Database;
  /** Called before a flow that must not need the cron; the returned check runs after it (Workers: invocation counts). */
  transport(): Promise<() => Promise<void>>;
}

const epoch = async (db: Database, q: ReturnType<typeof sql>) => Number((await queryRows<{ t: number }>(db.db, q))[0]?.t);

export function composeFlows(p: ComposePlatform) {
  const start = async (name: string, input: unknown, instanceId: string) => {
    const r = await api<{ instanceId: string; status: string }>(p.base(), "POST", `/workflows/${name}/instances`, { input, instanceId });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body;
  };
  const sendPayment = async (eventId: string, orderId: string, amount: number) => {
    const res = await fetch(`${p.base()}/events`, {
      method: "POST",
      headers: { "ce-specversion": "1.0", "ce-type": "payment.completed", "ce-source": "/payments", "ce-id": eventId, "content-type": "application/json" },
      body: JSON.stringify({ orderId, amount }),
    });
    expect(res.status).toBe(202);
    await res.text();
  };

  it("fanout_children: 20 parallel children; their ends wake the parent through the platform queue, no sweep", { timeout: 60_000 }, async () => {
    const check = await p.transport();
    const id = `${p.prefix}-fan`;
    await start("fanout_children", { count: 20 }, id);
    const done = await waitForStatus(p.base(), id, ["completed", "failed"], 50_000);
    expect(done.output).toEqual({ completed: Array.from({ length: 20 }, () => 3) });
    const kids = await queryRows<{ status: string }>(p.db().db, sql`SELECT status FROM workflow_instances WHERE parent_instance_id = ${id}`);
    expect(kids.map((k) => k.status)).toEqual(Array.from({ length: 20 }, () => "completed"));
    // The parent waits on one child at a time; a child that ended earlier is read when its wait is
    // reached, one follow-up message each, so the parent ends within a message hop per child of the
    // last child's end — not at a cron minute.
    const lag = await epoch(p.db(), sql`SELECT extract(epoch FROM (SELECT updated_at FROM workflow_instances WHERE instance_id = ${id}) - (SELECT max(updated_at) FROM workflow_instances WHERE parent_instance_id = ${id}))::float8 AS t`);
    console.log(`fanout_children (${p.prefix}): parent ended ${lag.toFixed(2)} s after its last child`);
    expect(lag).toBeGreaterThanOrEqual(0);
    expect(lag).toBeLessThan(20);
    await check();
  });

  it("payment_wait matched by data.orderId: two orders, each woken only by its own payment event", { timeout: 40_000 }, async () => {
    const check = await p.transport();
    const [a, b] = [`${p.prefix}-pay-a`, `${p.prefix}-pay-b`];
    await start("payment_wait", { orderId: `${a}-order` }, a);
    await start("payment_wait", { orderId: `${b}-order` }, b);
    await waitForStatus(p.base(), a, ["waiting_for_message"]);
    await waitForStatus(p.base(), b, ["waiting_for_message"]);
    await sendPayment(`${b}-evt`, `${b}-order`, 42);
    expect((await waitForStatus(p.base(), b, ["completed", "failed"])).output).toEqual({ orderId: `${b}-order`, amount: 42 });
    await new Promise((r) => setTimeout(r, 500)); // room for a wrong wake-up to show
    expect((await waitForStatus(p.base(), a, ["waiting_for_message", "completed", "failed"])).status).toBe("waiting_for_message");
    await sendPayment(`${a}-evt`, `${a}-order`, 7);
    expect((await waitForStatus(p.base(), a, ["completed", "failed"])).output).toEqual({ orderId: `${a}-order`, amount: 7 });
    await check();
  });

  it("stripe_checkout: a Stripe-signed delivery to /webhooks/stripe wakes the order's wait, verified on the platform's Web Crypto; a tampered one is a 401", { timeout: 40_000 }, async () => {
    const check = await p.transport();
    const id = `${p.prefix}-stripe`;
    await start("stripe_checkout", { orderId: `${id}-order` }, id);
    await waitForStatus(p.base(), id, ["waiting_for_message"]);
    const payload = JSON.stringify({ id: `evt_${id}`, object: "event", type: "checkout.session.completed", data: { object: { id: `cs_${id}`, metadata: { orderId: `${id}-order` } } } });
    const deliver = (body: string) =>
      fetch(`${p.base()}/webhooks/stripe`, { method: "POST", headers: { "content-type": "application/json", "stripe-signature": new Stripe("sk_test_unused").webhooks.generateTestHeaderString({ payload, secret: STRIPE_WEBHOOK_SECRET }) }, body });
    const forged = await deliver(payload.replace(`${id}-order`, "someone-else"));
    expect(forged.status).toBe(401);
    await forged.text();
    const res = await deliver(payload);
    expect(res.status, await res.text()).toBe(202);
    expect((await waitForStatus(p.base(), id, ["completed", "failed"])).output).toEqual({ paid: true, sessionId: `cs_${id}` });
    await check();
  });

  it("approval_link: the link createWebhook made (its token derived with the platform's Web Crypto) takes one POST; the next is 410 Gone", { timeout: 40_000 }, async () => {
    const check = await p.transport();
    const id = `${p.prefix}-approval`;
    await start("approval_link", { requestId: `${id}-req`, approver: "ana@example.com", expiresInSeconds: 600 }, id);
    await waitForStatus(p.base(), id, ["waiting_for_webhook"]);
    const [mail] = await queryRows<{ data: string }>(p.db().db, sql`SELECT event_data AS data FROM outbox_events WHERE event_type = 'approval.link_requested' AND (event_data::json ->> 'requestId') = ${`${id}-req`}`);
    const { pathname } = new URL((JSON.parse(mail!.data) as { link: string }).link, p.base());
    expect(pathname).toMatch(/^\/hooks\/[A-Za-z0-9_-]{43}$/);
    const decide = (approved: boolean) => fetch(`${p.base()}${pathname}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ approved, by: "ana" }) });
    const unknown = await fetch(`${p.base()}/hooks/${"B".repeat(43)}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(unknown.status).toBe(404);
    await unknown.text();
    const res = await decide(true);
    expect(res.status, await res.text()).toBe(202);
    expect((await waitForStatus(p.base(), id, ["completed", "failed"])).output).toEqual({ status: "approved", requestId: `${id}-req`, by: "ana" });
    const again = await decide(false);
    expect(again.status).toBe(410);
    await again.text();
    await check();
  });

  it("account_sync under one concurrency key: three starts run one at a time, in order, the queue drained without a cron run", { timeout: 60_000 }, async () => {
    const check = await p.transport();
    const account = `${p.prefix}-acct`;
    const ids = [0, 1, 2].map((i) => `${account}-${i}`);
    const statuses = [];
    for (const id of ids) statuses.push((await start("account_sync", { account, seconds: 1 }, id)).status);
    expect(statuses).toEqual(["running", "queued", "queued"]);
    for (const id of ids) expect((await waitForStatus(p.base(), id, ["completed", "failed"], 40_000)).output).toEqual({ account, records: 3 });
    // One at a time, oldest first: each ran its first activity only after the one before it had finished.
    const rows = await queryRows<{ id: string; first: number; ended: number }>(
      p.db().db,
      sql`SELECT i.instance_id AS id, extract(epoch FROM min(h.created_at))::float8 AS first, extract(epoch FROM i.updated_at)::float8 AS ended
          FROM workflow_instances i JOIN workflow_history h USING (instance_id)
          WHERE i.instance_id IN (${sql.join(ids, sql`, `)}) GROUP BY i.instance_id, i.updated_at ORDER BY i.instance_id`,
    );
    for (let i = 1; i < rows.length; i++) expect(Number(rows[i]!.first)).toBeGreaterThanOrEqual(Number(rows[i - 1]!.ended));
    await check();
  });

  it("export_report: an activity attempt past its 1 s limit and a run past its 5 s deadline fail with typed timeouts, the draft discarded", { timeout: 40_000 }, async () => {
    const check = await p.transport();
    const [slow, late] = [`${p.prefix}-export-slow`, `${p.prefix}-export-late`];
    await start("export_report", { name: "q3", renderMs: 5000 }, slow);
    await start("export_report", { name: "q4", waitSeconds: 60 }, late);
    const failedSlow = await waitForStatus(p.base(), slow, ["failed", "completed"], 20_000);
    expect(failedSlow.error).toMatchObject({ error_type: "RetryExhaustedError", cause: { name: "ActivityTimeoutError" } });
    // The deadline is carried by the platform queue's delayed wake-up: no cron run.
    const failedLate = await waitForStatus(p.base(), late, ["failed", "completed"], 20_000);
    expect(failedLate.error).toMatchObject({ error_type: "WorkflowTimeoutError" });
    for (const id of [slow, late]) expect(await compensations(p.db(), id)).toEqual([{ name: "discard_draft", result: { discarded: expect.stringMatching(/^draft-q[34]-/) as unknown } }]);
    await check();
  });
}

/** The compensations an instance ran, in order: `{ name, result }` (discard_draft returns `{ discarded }`). */
export async function compensations(db: Database, id: string): Promise<unknown[]> {
  const rows = await queryRows<{ data: string }>(db.db, sql`SELECT event_data AS data FROM workflow_history WHERE instance_id = ${id} AND event_type = 'CompensationExecuted' ORDER BY id`);
  return rows.map((r) => JSON.parse(r.data) as unknown);
}

/**
 * What only a sweep does: an export whose process died before its deadline
 * wake-up (started here by a Node engine that schedules no wake-ups and is
 * then closed) and daily_report's schedule made due. Returns the ids.
 */
export async function prepareSweepWork(databaseUrl: string, base: string, db: Database, prefix: string): Promise<{ orphan: string }> {
  const database = createPostgresJsDatabase({ url: databaseUrl, max: 2 });
  const dispatcher = new LocalDispatcher({ maxWakeSeconds: 0 });
  const node = createEdda({ workflows, database, dispatcher });
  const orphan = `${prefix}-export-orphan`;
  try {
    await node.start("export_report", { name: "orphan", waitSeconds: 600 }, { instanceId: orphan });
    const deadline = Date.now() + 20_000;
    while ((await node.getInstance(orphan))?.status !== "waiting_for_timer") {
      if (Date.now() > deadline) throw new Error("the orphan export did not reach its sleep");
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await node.close();
    await database.close();
  }
  // The app registers its schedules when it first lists or sweeps them; then the tick is made due.
  expect((await api(base, "GET", "/schedules")).status).toBe(200);
  await db.db.execute(sql`UPDATE workflow_schedules SET next_run_at = now() - interval '1 second' WHERE workflow_name = 'daily_report'`);
  return { orphan };
}

/** After one platform cron sweep (or more) ran: the orphan timed out with its compensation, and exactly one schedule tick started and completed. */
export async function checkSweepWork(base: string, db: Database, orphan: string): Promise<void> {
  const timedOut = await waitForStatus(base, orphan, ["failed", "completed"], 20_000);
  expect(timedOut.error).toMatchObject({ error_type: "WorkflowTimeoutError" });
  expect(await compensations(db, orphan)).toEqual([{ name: "discard_draft", result: { discarded: `draft-orphan-${orphan}` } }]);
  const ticks = await queryRows<{ id: string }>(db.db, sql`SELECT instance_id AS id FROM workflow_instances WHERE workflow_name = 'daily_report'`);
  expect(ticks).toHaveLength(1);
  expect(ticks[0]!.id).toMatch(/^schedule:daily_report:\d{4}-\d\d-\d\dT/);
  const done = await waitForStatus(base, ticks[0]!.id, ["completed", "failed"]);
  expect(done.status).toBe("completed");
}
