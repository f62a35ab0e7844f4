// Follow-up transports under platform limits, on real Postgres: per-request
// engines sharing one dispatcher each run their own steps; fetch follow-ups
// carry a hop count and stop at the bound (the instance is left runnable for
// the sweep, and its view says so); one subrequest budget per invocation
// covers follow-ups and the outbox, and a "too many subrequests" refusal is
// not a delivery attempt; an in-process timer whose firing fails does not
// become an unhandled rejection.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { announce } from "../../functions/workflows/announce.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { LocalDispatcher, type Dispatcher } from "../../src/engine/dispatcher.ts";
import { Engine } from "../../src/engine/engine.ts";
import { HttpDispatcher } from "../../src/engine/http-dispatcher.ts";
import { createEdda, engineOf, type Edda } from "../../src/edda.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import { startTestBroker, type TestBroker } from "../support/broker.ts";
import { freshPostgres } from "../support/engine.ts";

const SECRET = "limits-secret";
let broker: TestBroker;
const open: Database[] = [];

beforeAll(async () => {
  broker = await startTestBroker();
});
afterAll(async () => {
  await broker.stop();
  await Promise.all(open.map((d) => d.close().catch(() => undefined)));
});

async function database(prefix: string): Promise<Database> {
  const pg = await freshPostgres(prefix);
  const d = pg.open();
  open.push(d);
  return d;
}

async function until<T>(what: string, check: () => Promise<T | null | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** An app whose follow-ups loop back into itself over `fetch` (like Workers' ctx.exports), recording each request's hop. */
function loopbackApp(db: Database, opts: { maxHops?: number; subrequestLimit?: number; brokerFetch?: typeof fetch; continueWith?: Dispatcher } = {}) {
  const hops: number[] = [];
  let edda: Edda | null = null;
  const loopback: typeof fetch = async (input, init) => {
    hops.push((JSON.parse(String(init?.body)) as { hop: number }).hop);
    return edda!.fetch(new Request(input as string, init));
  };
  edda = createEdda({
    workflows: [pipeline, announce],
    database: db,
    secret: SECRET,
    brokerUrl: broker.url,
    outbox: opts.brokerFetch ? { fetch: opts.brokerFetch } : {},
    dispatcher: new HttpDispatcher({ baseUrl: "http://edda.test", secret: SECRET, fetch: loopback, ...(opts.maxHops ? { maxHops: opts.maxHops } : {}), ...(opts.continueWith ? { continueWith: opts.continueWith } : {}) }),
    ...(opts.subrequestLimit !== undefined ? { subrequestLimit: opts.subrequestLimit } : {}),
  });
  return { edda, hops };
}

describe("per-request engines on one dispatcher", () => {
  it("each engine runs the steps it dispatched, on its own database (no engine replaces another)", async () => {
    const [dbA, dbB] = await Promise.all([database("limits_attach_a"), database("limits_attach_b")]);
    const dispatcher = new LocalDispatcher();
    const a = new Engine({ storage: createStorage(dbA), workflows: [pipeline], dispatcher });
    const b = new Engine({ storage: createStorage(dbB), workflows: [pipeline], dispatcher });
    // Started in this order, B is the last engine built: before, every follow-up ran on it.
    const [ra, rb] = await Promise.all([a.start("pipeline", { steps: 5 }, { instanceId: "on-a" }), b.start("pipeline", { steps: 3 }, { instanceId: "on-b" })]);
    expect([ra.created, rb.created]).toEqual([true, true]);
    const doneA = await until("A completes", async () => ((await a.getInstance("on-a"))?.status === "completed" ? a.getInstance("on-a") : null));
    const doneB = await until("B completes", async () => ((await b.getInstance("on-b"))?.status === "completed" ? b.getInstance("on-b") : null));
    expect(doneA!.output).toEqual({ completed: 5 });
    expect(doneB!.output).toEqual({ completed: 3 });
    expect(await a.getInstance("on-b")).toBeNull();
    expect(await b.getInstance("on-a")).toBeNull();
    await dispatcher.close();
  });

  it("createEdda with a database per request: concurrent requests complete their workflows before their database closes", async () => {
    const pg = await freshPostgres("limits_per_request");
    const opened: Database[] = [];
    const edda = createEdda({
      workflows: [pipeline],
      secret: SECRET,
      dispatcher: new LocalDispatcher(),
      database: () => {
        const d = pg.open();
        opened.push(d);
        return d;
      },
    });
    const starts = await Promise.all(
      [1, 2, 3].map((i) => edda.fetch(new Request("http://localhost/workflows/pipeline/instances", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { steps: 4 }, instanceId: `req-${i}` }) }))),
    );
    expect(starts.map((r) => r.status)).toEqual([201, 201, 201]);
    const check = pg.open();
    open.push(check);
    const rows = await queryRows<{ instance_id: string; status: string }>(check.db, sql`SELECT instance_id, status FROM workflow_instances ORDER BY instance_id`);
    // edda.fetch (no ctx) returns once the request's background work is done: every step ran on its own request's engine.
    expect(rows).toEqual([1, 2, 3].map((i) => ({ instance_id: `req-${i}`, status: "completed" })));
    expect(opened).toHaveLength(3);
  });
});

describe("bounded hops", () => {
  it("a follow-up chain stops at maxHops: the instance is left runnable (its view says so) and the sweep carries it on", async () => {
    const db = await database("limits_hops");
    const { edda, hops } = loopbackApp(db, { maxHops: 3 });
    await edda.start("pipeline", { steps: 10 }, { instanceId: "hops-1" });
    // Start (hop 1) + 2 more hops of follow-ups, then the chain stops.
    const stopped = await until("chain stops", async () => {
      const v = await edda.getInstance("hops-1");
      return hops.includes(3) && v?.runnable ? v : null;
    });
    expect(stopped.status).toBe("running");
    await new Promise((r) => setTimeout(r, 200));
    expect((await edda.getInstance("hops-1"))!.runnable).toBe(true);
    expect(Math.max(...hops)).toBe(3);
    const [done] = await queryRows<{ n: number }>(db.db, sql`SELECT count(*)::int AS n FROM workflow_history WHERE instance_id = 'hops-1' AND event_type = 'ActivityCompleted'`);
    expect(done!.n).toBeLessThan(10);

    // Each sweep is a new invocation (hop 0): it re-dispatches and the chain runs another three hops.
    for (let i = 0; i < 10 && (await edda.getInstance("hops-1"))!.status !== "completed"; i++) {
      await edda.sweep({ resumeIdleSeconds: 0 });
      await until("settles", async () => {
        const v = await edda.getInstance("hops-1");
        return v && (v.runnable || v.status === "completed") ? v : null;
      });
    }
    const final = await edda.getInstance("hops-1", { history: true });
    expect(final!.status).toBe("completed");
    expect(final!.output).toEqual({ completed: 10 });
    expect(final!.runnable).toBe(false);
    expect(hops.every((h) => h >= 1 && h <= 3)).toBe(true);
  });

  it("with continueWith (the platform's queue), a chain at the bound goes on through it at once, not through the sweep", async () => {
    const db = await database("limits_hops_queue");
    // Stands for the queue: every step it gets is a top-level invocation of its own (hop 0).
    const queue = new LocalDispatcher();
    let continued = 0;
    const counting: Dispatcher = {
      attach: (r) => queue.attach(r),
      dispatch: (req, scope) => {
        continued++;
        queue.dispatch(req, { ...scope, hop: 0 });
      },
      close: () => queue.close(),
    };
    const { edda, hops } = loopbackApp(db, { maxHops: 3, continueWith: counting });
    try {
      await edda.start("pipeline", { steps: 10 }, { instanceId: "hops-q" });
      // No sweep runs: the chain reaches the end through fetches (hops 1..3) and the queue between them.
      const done = await until("completed without a sweep", async () => {
        const v = await edda.getInstance("hops-q");
        return v?.status === "completed" ? v : null;
      });
      expect(done.status).toBe("completed");
      expect(Math.max(...hops)).toBe(3);
      expect(continued).toBeGreaterThanOrEqual(2);
    } finally {
      await queue.idle();
      await edda.close();
    }
  });

  it("a hop count beyond the bound in a signed request is refused work, not an error: the step still runs and dispatches nothing further", async () => {
    const db = await database("limits_hops_in");
    const { edda, hops } = loopbackApp(db, { maxHops: 2 });
    const engine = await engineOf(edda);
    await engine.createValidated(engine.storage, engine.workflow("pipeline"), { steps: 3 }, { instanceId: "deep-1" });
    const { sign } = await import("../../src/core/signature.ts");
    const body = JSON.stringify({ instanceId: "deep-1", hop: 2 });
    const res = await edda.fetch(new Request("http://edda.test/_edda/step", { method: "POST", headers: { "content-type": "application/json", ...(await sign(SECRET, { method: "POST", path: "/_edda/step", body })) }, body }));
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ accepted: 1 });
    const v = await until("step ran", async () => {
      const x = await edda.getInstance("deep-1", { history: true });
      return x && x.history!.length > 0 && x.runnable ? x : null;
    });
    expect(v.status).toBe("running");
    expect(hops).toEqual([]); // hop 3 > 2: not sent
  });
});

describe("one subrequest budget per invocation", () => {
  it("follow-ups and the outbox relay of one sweep share the budget; rows beyond it stay pending with no attempt counted", async () => {
    const db = await database("limits_budget");
    let sent = 0;
    const counting: typeof fetch = (input, init) => {
      sent++;
      return fetch(input, init);
    };
    const { edda } = loopbackApp(db, { subrequestLimit: 4, brokerFetch: counting });
    const engine = await engineOf(edda);
    for (let i = 0; i < 6; i++) {
      await engine.storage.addOutboxEvent({ eventId: `budget-${i}`, eventType: "ok.budget", eventSource: "/t", data: { type: "json", json: String(i) } });
    }
    const report = await edda.sweep();
    expect(report.outbox.published).toBe(4);
    expect(sent).toBe(4);
    const rows = await queryRows<{ status: string; retry_count: number }>(db.db, sql`SELECT status, retry_count FROM outbox_events ORDER BY event_id`);
    expect(rows.filter((r) => r.status === "published")).toHaveLength(4);
    expect(rows.filter((r) => r.status === "pending")).toEqual([
      { status: "pending", retry_count: 0 },
      { status: "pending", retry_count: 0 },
    ]);
    // The next invocation has its own budget: the rest goes out.
    expect((await edda.sweep()).outbox.published).toBe(2);
  });

  it("the platform's 'too many subrequests' refusal is not a delivery attempt: the row stays due, retry_count 0", async () => {
    const db = await database("limits_refused");
    let calls = 0;
    // workerd throws this once an invocation made more subrequests than its plan allows (wrangler dev does not enforce it).
    const platform: typeof fetch = (input, init) => {
      if (++calls <= 2) return Promise.reject(new Error("Too many subrequests."));
      return fetch(input, init);
    };
    const { edda } = loopbackApp(db, { brokerFetch: platform });
    const engine = await engineOf(edda);
    await engine.storage.addOutboxEvent({ eventId: "refused-1", eventType: "ok.refused", eventSource: "/t", data: { type: "json", json: "1" } });
    await engine.storage.addOutboxEvent({ eventId: "refused-2", eventType: "ok.refused", eventSource: "/t", data: { type: "json", json: "2" } });
    const first = await edda.sweep();
    expect(first.outbox).toMatchObject({ published: 0, failed: 0, deferred: 2 });
    const rows = await queryRows<{ status: string; retry_count: number }>(db.db, sql`SELECT status, retry_count FROM outbox_events ORDER BY event_id`);
    expect(rows).toEqual([
      { status: "pending", retry_count: 0 },
      { status: "pending", retry_count: 0 },
    ]);
    expect((await edda.sweep()).outbox).toMatchObject({ published: 2, failed: 0 });
    expect(broker.deliveries("refused-1")).toHaveLength(1);
  });

  it("a fan-out of one invocation goes out in few requests, within the budget; nothing is lost", async () => {
    const db = await database("limits_fanout");
    const { edda, hops } = loopbackApp(db, { subrequestLimit: 3 });
    const engine = await engineOf(edda);
    for (let i = 0; i < 12; i++) await engine.createValidated(engine.storage, engine.workflow("pipeline"), { steps: 0 }, { instanceId: `fan-${i}` });
    // One sweep (one invocation) dispatches all twelve: what it dispatches in one turn travels in one request, never more than the budget's 3.
    await edda.sweep({ resumeIdleSeconds: 0 });
    await until("all complete", async () => {
      const [r] = await queryRows<{ n: number }>(db.db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status = 'completed'`);
      return r!.n === 12;
    });
    const sent = hops.filter((h) => h === 1).length;
    expect(sent).toBeGreaterThanOrEqual(1);
    expect(sent).toBeLessThanOrEqual(3);
  });
});

describe("in-process timer wake-ups", () => {
  it("a wake-up whose firing fails (database gone) is logged, never an unhandled rejection", async () => {
    const db = await database("limits_wake");
    const dispatcher = new HttpDispatcher({ baseUrl: "http://edda.test", secret: SECRET, maxWakeSeconds: 1 });
    const engine = new Engine({ storage: createStorage(db), workflows: [pipeline], dispatcher });
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on("unhandledRejection", onUnhandled);
    try {
      await db.close();
      engine.dispatcher.wakeIn!(0.05);
      await new Promise((r) => setTimeout(r, 400));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      await dispatcher.close();
    }
  });

  it("by default the http dispatcher never holds an invocation open for a timer", () => {
    const dispatcher = new HttpDispatcher({ baseUrl: "http://edda.test", secret: SECRET });
    const held: Promise<unknown>[] = [];
    dispatcher.wakeIn(1, { waitUntil: (p) => held.push(p), runner: { runStep: () => Promise.resolve(), fireDueTimers: () => Promise.resolve(0) } });
    expect(held).toEqual([]);
  });
});
