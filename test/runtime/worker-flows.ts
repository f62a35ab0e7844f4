// The Worker entry (functions/worker.ts) end to end in real workerd under
// `wrangler dev` (follow-ups on its local queue), against a fresh migrated database on the test Postgres and a
// real HTTP CloudEvents receiver. Shared by the postgres.js and Neon files:
// each spawns one wrangler and runs these flows through it.
import { summarizeStreamFlow } from "./stream-flow.ts";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { queryRows } from "../../src/storage/database.ts";
import { startTestBroker, type TestBroker } from "../support/broker.ts";
import { api, waitForStatus } from "./processes.ts";
import { fireCron, startWorkerWith } from "./worker-setup.ts";

export interface WorkerFlowsOptions {
  prefix: string;
  /** Worker vars; a function is read when the worker starts (after earlier beforeAll hooks). */
  vars?: Record<string, string> | (() => Record<string, string>);
  publicUrl?: boolean;
  /** Also run the slower flows (outbox retry by the cron, auth). */
  full?: boolean;
}

export function workerFlows(opts: WorkerFlowsOptions) {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startTestBroker();
  });
  afterAll(async () => {
    await broker?.stop();
  });
  const w = startWorkerWith(
    opts.prefix,
    () => ({ EDDA_SECRET: "workerd-secret", EDDA_BROKER_URL: broker.url, ...(typeof opts.vars === "function" ? opts.vars() : opts.vars) }),
    { publicUrl: opts.publicUrl ?? false },
  );

  const base = () => w.worker.url;
  const scheduled = () => fireCron(base());
  const start = async (name: string, input: unknown, instanceId: string) => {
    const r = await api<{ instanceId: string }>(base(), "POST", `/workflows/${name}/instances`, { input, instanceId });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.instanceId;
  };

  it("a realtime stream: the client iterator reads every token once and in order, the emit, the end (bounded poll)", async () => {
    await summarizeStreamFlow(base(), `${opts.prefix}-stream`);
  });

  it("order_saga and pipeline started over HTTP complete through follow-up requests alone", async () => {
    const saga = await start("order_saga", { orderId: "o-1", amount: 25 }, "saga-ok");
    const failing = await start("order_saga", { orderId: "o-2", amount: 25, failAt: "shipping" }, "saga-fails");
    const pipe = await start("pipeline", { steps: 12 }, "pipe-12");
    expect((await waitForStatus(base(), saga, ["completed", "failed"])).output).toEqual({ orderId: "o-1", status: "shipped" });
    expect((await waitForStatus(base(), pipe, ["completed", "failed"])).output).toEqual({ completed: 12 });
    const failed = await waitForStatus(base(), failing, ["failed", "completed"]);
    expect(failed.status).toBe("failed");
    const history = await api<{ history: { eventType: string; activityId: string }[] }>(base(), "GET", `/instances/${failing}?history=1`);
    const comps = history.body.history.filter((h) => h.eventType === "CompensationExecuted").map((h) => h.activityId);
    expect(comps).toHaveLength(2); // refund, then release: newest first
  });

  it("a workflow waiting for a CloudEvent completes when the event is POSTed (wake-up and follow-up after commit)", async () => {
    const id = await start("payment_wait", { orderId: "o-9" }, "payment-wait-1");
    await waitForStatus(base(), id, ["waiting_for_message"]);
    const res = await fetch(`${base()}/events`, {
      method: "POST",
      headers: { "ce-specversion": "1.0", "ce-type": "payment.completed", "ce-source": "/payments", "ce-id": "evt-1", "ce-eddainstanceid": id, "content-type": "application/json" },
      body: JSON.stringify({ amount: 42 }),
    });
    expect(res.status).toBe(202);
    await res.text();
    expect((await waitForStatus(base(), id, ["completed", "failed"])).output).toEqual({ orderId: "o-9", amount: 42 });
  });

  it("a sleeping workflow is woken by a delayed queue message, with no cron run", async () => {
    const before = (await api<{ scheduled: number }>(base(), "GET", "/_edda/invocations")).body.scheduled;
    const id = await start("reminder", { seconds: 1 }, "reminder-1");
    expect((await waitForStatus(base(), id, ["completed"], 10_000)).output).toEqual({ reminded: true });
    expect((await api<{ scheduled: number }>(base(), "GET", "/_edda/invocations")).body.scheduled).toBe(before);
  });

  it("an outbox event reaches the broker right after the committing step, as a structured CloudEvent", async () => {
    const id = await start("announce", { type: "ok.order.shipped", data: { orderId: "o-1" } }, "announce-ok");
    const inst = await waitForStatus(base(), id, ["completed", "failed"]);
    const eventId = (inst.output as { eventId: string }).eventId;
    await until(() => broker.deliveries(eventId).length > 0);
    const [req] = broker.deliveries(eventId);
    expect(req!.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
    expect(req!.body).toMatchObject({ specversion: "1.0", id: eventId, type: "ok.order.shipped", source: "edda-edge/examples/announce", data: { orderId: "o-1" } });
    await until(async () => (await outboxStatus(eventId)) === "published");
  });

  if (!opts.full) return;

  it("an event the broker answered 5xx is retried by the cron sweep and then published", { timeout: 30_000 }, async () => {
    const id = await start("announce", { type: "flaky.order.paid", data: 1 }, "announce-flaky");
    const eventId = ((await waitForStatus(base(), id, ["completed"])).output as { eventId: string }).eventId;
    await until(async () => (await outboxStatus(eventId)) === "failed");
    await new Promise((r) => setTimeout(r, 2100)); // the first backoff (2 s)
    await scheduled();
    await until(async () => (await outboxStatus(eventId)) === "published");
    expect(broker.deliveries(eventId).map((d) => d.status)).toEqual([500, 200]);
  });

  it("internal routes refuse unsigned requests", async () => {
    const step = await api<{ error_type: string }>(base(), "POST", "/_edda/step", { instanceId: "saga-ok" });
    expect(step.status).toBe(401);
    expect((await api(base(), "POST", "/_edda/sweep", {})).status).toBe(401);
  });

  async function outboxStatus(eventId: string): Promise<string | undefined> {
    const [r] = await queryRows<{ status: string }>(w.db.db, sql`SELECT status FROM outbox_events WHERE event_id = ${eventId}`);
    return r?.status;
  }
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 100));
  }
}
