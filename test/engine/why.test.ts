// Issue 37: `GET /instances/:id/why` on real Postgres. Every kind of reason is produced by a real
// instance in that state (a step in flight, each wait, each flow-control queue, a retry backoff, a
// lease left by an engine that died, a follow-up that was never delivered, code not deployed,
// diverged code, quarantine, finished) and its fields are checked through the route.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, createEdda, createWebhook, invoke, sleep, waitEvent, waitMessage, workflow, type Edda, type WhyView } from "../../src/index.ts";
import { HttpDispatcher } from "../../src/engine/http-dispatcher.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import type { Database } from "../../src/storage/database.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

let release: () => void = () => {};
let held = new Promise<void>((r) => (release = r));
const hold = activity("why_hold", async () => {
  await held;
  return "held";
});
const holding = workflow("why_holding", async (ctx) => hold(ctx));
const sleeper = workflow("why_sleeper", async (ctx) => {
  await sleep(ctx, 3600);
});
const listener = workflow("why_listener", async (ctx) => waitMessage(ctx, "why-go", { timeoutSeconds: 600 }));
const payer = workflow("why_payer", { input: z.object({ orderId: z.string() }) }, async (ctx, { orderId }) => waitEvent(ctx, "why.paid", { match: { "data.orderId": orderId }, timeoutSeconds: 900 }));
const parent = workflow("why_parent", async (ctx) => invoke(ctx, listener, undefined));
const hooked = workflow("why_hooked", async (ctx) => {
  const hook = await createWebhook(ctx, { expiresIn: 1200 });
  return (await hook.wait()).body;
});
const account = z.object({ account: z.string() });
const gate = workflow("why_gate", { input: account, concurrency: { key: (i: { account: string }) => i.account, limit: 1 } }, async (ctx) => waitMessage(ctx, "why-open"));
const rated = workflow("why_rated", { input: account, rateLimit: { key: (i: { account: string }) => i.account, limit: 1, periodSeconds: 3600 } }, async () => "ok");
const debounced = workflow("why_debounced", { input: account, debounce: { key: (i: { account: string }) => i.account, periodSeconds: 3600 } }, async () => "ok");
const flaky = activity(
  "why_flaky",
  async () => {
    throw new Error("upstream said no");
  },
  { retry: { maxAttempts: 3, initialIntervalSeconds: 3600, maxIntervalSeconds: 3600, maxDurationSeconds: 86_400 } },
);
const retrying = workflow("why_retrying", async (ctx) => flaky(ctx));
const idle = workflow("why_idle", async () => "idle");
/** Registered in both apps: started where its follow-up is refused, it is app A's to run. */
const stuck = workflow("why_stuck", async () => "stuck");
const stepB = activity("why_step_b", async () => "b");
const stepC = activity("why_step_c", async () => "c");
const upV1 = workflow("why_up", async (ctx) => {
  await stepB(ctx);
  return waitMessage(ctx, "why-up-go");
});
const upV3 = workflow("why_up", async (ctx) => {
  await stepC(ctx);
  return waitMessage(ctx, "why-up-go");
});
const echo = activity("why_echo", async () => 1);
const poisoned = workflow("why_poisoned", async (ctx) => echo(ctx));

const TOKEN = "why-token";
let pg: { url: string; open(): Database };
let a: TestApp;
/** Take the lease as an engine that then dies: once the refused follow-up gave its hand-off back. */
async function leaseAndDie(db: Database, instanceId: string, seconds: number): Promise<void> {
  const storage = createStorage(db);
  for (let i = 0; i < 100; i++) {
    if (await storage.acquireLease(instanceId, "engine-that-died", seconds)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`could not lease ${instanceId}`);
}
/** The same database with a dispatcher whose follow-ups are all refused (503), registering only `why_idle`. */
let dropping: Edda;
let droppingDb: Database;
const extra: TestApp[] = [];

const api = (edda: Edda, path: string) => edda.fetch(new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }));
async function why(id: string, edda: Edda = a.edda): Promise<WhyView> {
  const res = await api(edda, `/instances/${encodeURIComponent(id)}/why`);
  expect(res.status).toBe(200);
  return (await res.json()) as WhyView;
}
const WORKFLOWS = [stuck, holding, sleeper, listener, payer, parent, hooked, gate, rated, debounced, retrying, upV1, poisoned];
const near = (iso: string | undefined, ms: number, slackMs = 60_000) => {
  expect(iso).toBeDefined();
  expect(Math.abs(new Date(iso!).getTime() - ms)).toBeLessThan(slackMs);
};

beforeAll(async () => {
  pg = await freshPostgres("why");
  a = makeTestApp(pg.open(), { workflows: WORKFLOWS, serviceName: "why-a", apiToken: TOKEN, quarantineAfterFailures: 2, deployment: "why-release" });
  droppingDb = pg.open();
  const refuse: typeof fetch = async () => new Response("unavailable", { status: 503 });
  dropping = createEdda({ workflows: [idle, stuck], database: droppingDb, secret: "s", apiToken: TOKEN, dispatcher: new HttpDispatcher({ baseUrl: "http://edda.test", secret: "s", fetch: refuse }) });
  // Real database faults: the history rows of instances named why-poison-* are refused, so every step throws while concluding.
  await a.database.db.execute(sql`
    CREATE FUNCTION why_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.instance_id LIKE 'why-poison-%' THEN RAISE EXCEPTION 'refused history of %', NEW.instance_id; END IF;
      RETURN NEW;
    END $$`);
  await a.database.db.execute(sql`CREATE TRIGGER why_refuse_history BEFORE INSERT ON workflow_history FOR EACH ROW EXECUTE FUNCTION why_refuse()`);
});
afterAll(async () => {
  release();
  for (const x of [a, ...extra]) await x.edda.close();
  await dropping.close();
  for (const x of [a, ...extra]) await x.database.close();
  await droppingDb.close();
});

describe("GET /instances/:id/why on Postgres: one reason per state", () => {
  it("running: the step in flight, on which engine, since when, its lease", async () => {
    const { instanceId } = await a.edda.start(holding, undefined);
    let w = await why(instanceId);
    for (let i = 0; i < 200 && w.reason.kind !== "running"; i++) {
      await new Promise((r) => setTimeout(r, 20));
      w = await why(instanceId);
    }
    expect(w).toMatchObject({ instanceId, status: "running", reason: { kind: "running" } });
    if (w.reason.kind !== "running") throw new Error("unreachable");
    expect(w.reason.facts.engine).toMatch(/^why-a:/);
    expect(w.reason.blockedBy).toEqual([w.reason.facts.engine]);
    expect(w.reason.facts.leaseExpiresAt).toBe(w.reason.until);
    near(w.reason.since!, Date.now());
    expect(w.reason.detail).toContain(w.reason.facts.engine);
    expect(w.reason.next).toMatch(/cancel/);
    release();
    await a.waitFor(instanceId);
    expect((await why(instanceId)).reason).toMatchObject({ kind: "none", facts: { status: "completed" } });
    held = new Promise<void>((r) => (release = r));
  });

  it("timer: the sleep, until when, and who fires it; the instance view carries the same reason", async () => {
    const { instanceId } = await a.edda.start(sleeper, undefined);
    await a.waitFor(instanceId, ["waiting_for_timer"]);
    const w = await why(instanceId);
    expect(w.reason).toMatchObject({ kind: "timer", facts: { timerId: "sleep:1", activityId: "sleep:1", dispatcherWakeUp: true } });
    near(w.reason.until, Date.now() + 3600_000);
    expect(w.reason.detail).toMatch(/sleeping at sleep:1 until .* \(in 60 min\)/);
    const view = (await (await api(a.edda, `/instances/${instanceId}`)).json()) as { why: unknown };
    expect(view.why).toEqual(w.reason);
  });

  it("message: the channel, its timeout, and the latest message it could see (none, then one sent to another instance is not it)", async () => {
    const { instanceId } = await a.edda.start(listener, undefined);
    await a.waitFor(instanceId, ["waiting_for_message"]);
    let w = await why(instanceId);
    expect(w.reason).toMatchObject({ kind: "message", facts: { channel: "why-go", mode: "direct", activityId: "receive_why-go:1", lastMessage: null } });
    near(w.reason.until, Date.now() + 600_000);
    expect(w.reason.detail).toContain("none seen yet");
    expect(w.reason.next).toContain(`POST /instances/${instanceId}/messages`);
    // Addressed to someone else: still nothing this instance could see.
    await a.edda.publish("why-go", 1, { targetInstanceId: "someone-else" });
    w = await why(instanceId);
    expect(w.reason).toMatchObject({ kind: "message", facts: { lastMessage: null } });
  });

  it("event: the event type, its match, its timeout, the latest event on the channel", async () => {
    const { instanceId } = await a.edda.start(payer, { orderId: "o-7" });
    await a.waitFor(instanceId, ["waiting_for_message"]);
    await a.edda.publish("why.paid", { orderId: "o-other" });
    const w = await why(instanceId);
    expect(w.reason).toMatchObject({ kind: "event", facts: { type: "why.paid", match: { data: { orderId: "o-7" } } } });
    if (w.reason.kind !== "event") throw new Error("unreachable");
    expect(w.reason.facts.lastEvent?.messageId).toBeTruthy();
    near(w.reason.until, Date.now() + 900_000);
    expect(w.reason.detail).toContain('matching {"data":{"orderId":"o-7"}}');
  });

  it("child: which child, and the child's own why", async () => {
    const { instanceId } = await a.edda.start(parent, undefined);
    await a.waitFor(instanceId, ["waiting_for_child"]);
    const child = (await a.edda.getInstance(instanceId))!.children[0]!;
    await a.waitFor(child.instanceId, ["waiting_for_message"]);
    const w = await why(instanceId);
    expect(w.reason).toMatchObject({ kind: "child", blockedBy: [child.instanceId], facts: { children: [{ instanceId: child.instanceId, workflowName: "why_listener", status: "waiting_for_message", why: { kind: "message" } }] } });
    expect(w.reason.detail).toContain(child.instanceId);
  });

  it("webhook: its URL's expiry", async () => {
    const { instanceId } = await a.edda.start(hooked, undefined);
    await a.waitFor(instanceId, ["waiting_for_webhook"]);
    const w = await why(instanceId);
    expect(w.reason).toMatchObject({ kind: "webhook", facts: { hookId: "webhook:1", waitId: "webhook:1:wait" } });
    near(w.reason.until, Date.now() + 1200_000);
    if (w.reason.kind !== "webhook") throw new Error("unreachable");
    expect(w.reason.facts.expiresAt).toBe(w.reason.until);
  });

  it("concurrency: the key, the holder of its slot and the queue before it", async () => {
    const first = await a.edda.start(gate, { account: "acme" });
    const second = await a.edda.start(gate, { account: "acme" });
    const third = await a.edda.start(gate, { account: "acme" });
    await a.waitFor(first.instanceId, ["waiting_for_message"]);
    const w = await why(third.instanceId);
    expect(w).toMatchObject({ status: "queued", reason: { kind: "concurrency", blockedBy: [first.instanceId, second.instanceId], facts: { key: "acme", limit: 1, holders: [first.instanceId], ahead: 1 } } });
    expect(w.reason.detail).toContain(`held by ${first.instanceId}`);
    expect(w.reason.next).toContain(`when ${first.instanceId} ends`);
    expect((await why(second.instanceId)).reason).toMatchObject({ kind: "concurrency", blockedBy: [first.instanceId], facts: { ahead: 0 } });
  });

  it("rate_limit: the key, the admission holding the window, when the window opens", async () => {
    const first = await a.edda.start(rated, { account: "r1" });
    const second = await a.edda.start(rated, { account: "r1" });
    expect(second.status).toBe("queued");
    const w = await why(second.instanceId);
    expect(w.reason).toMatchObject({ kind: "rate_limit", blockedBy: [first.instanceId], facts: { key: "r1", limit: 1, periodSeconds: 3600, admittedInWindow: 1, ahead: 0 } });
    near(w.reason.until, Date.now() + 3600_000);
  });

  it("debounce: the key and when it starts", async () => {
    const d = await a.edda.start(debounced, { account: "d1" });
    const w = await why(d.instanceId);
    expect(w.reason).toMatchObject({ kind: "debounce", blockedBy: ["d1"], facts: { key: "d1" } });
    near(w.reason.until, Date.now() + 3600_000);
  });

  it("retry_backoff: attempt n of m, the last error, when the next attempt runs", async () => {
    const { instanceId } = await a.edda.start(retrying, undefined);
    await a.waitFor(instanceId, ["waiting_for_timer"]);
    const w = await why(instanceId);
    expect(w.reason).toMatchObject({
      kind: "retry_backoff",
      facts: { activityId: "why_flaky:1", activityName: "why_flaky", attempt: 1, maxAttempts: 3, lastError: { type: "Error", message: "upstream said no" } },
    });
    if (w.reason.kind !== "retry_backoff") throw new Error("unreachable");
    expect(w.reason.facts.nextAttemptAt).toBe(w.reason.until);
    near(w.reason.until, Date.now() + 3600_000);
    expect(w.reason.detail).toContain("attempt 1 of 3 of why_flaky failed (Error: upstream said no)");
  });

  it("dispatch_pending, then leased: a follow-up never delivered, then a lease left by an engine that died; pinned where the workflow is not deployed", async () => {
    // Started through an app whose follow-ups are refused: runnable, and no step has it.
    const { instanceId } = await dropping.start(idle, undefined);
    const w = await why(instanceId, dropping);
    // No sweep has run against this database yet: the commonest stall, said as such.
    expect(w).toMatchObject({ status: "running", reason: { kind: "dispatch_pending", facts: { lastSweepAt: null } } });
    expect(w.reason.detail).toContain("no sweep has run its resumable task yet");
    expect(w.reason.next).toContain("next sweep");
    // An engine takes the lease for 1 s and dies (nothing releases it).
    await leaseAndDie(droppingDb, instanceId, 1);
    expect((await why(instanceId, dropping)).reason).toMatchObject({ kind: "running", facts: { engine: "engine-that-died" } });
    await new Promise((r) => setTimeout(r, 1_200));
    const left = await why(instanceId, dropping);
    expect(left.reason).toMatchObject({ kind: "leased", blockedBy: ["engine-that-died"], facts: { engine: "engine-that-died" } });
    expect(left.reason.detail).toMatch(/expired \d+ s ago and nobody has taken it over .*; no sweep has run its stale_leases task yet/);
    expect(left.reason.next).toContain("stale-lease");
    // Seen from app A, which does not register why_idle: no step there will ever run it.
    expect((await why(instanceId)).reason).toMatchObject({ kind: "pinned", facts: { workflowName: "why_idle" } });
  });

  it("parked: replay diverged after a deploy; the code it waits for", async () => {
    const { instanceId } = await a.edda.start(upV1, undefined);
    await a.waitFor(instanceId, ["waiting_for_message"]);
    // The same deployment id with other code (EDDA_DEPLOYMENT kept across a deploy): the instance is this
    // deployment's, its replay diverges, it parks. (A new deployment id would leave it on its own: deployment-versions.test.ts.)
    const careless = makeTestApp(pg.open(), { workflows: [upV3], serviceName: "why-careless", apiToken: TOKEN, deployment: "why-release" });
    extra.push(careless);
    await careless.edda.publish("why-up-go", "now", { targetInstanceId: instanceId });
    await careless.waitFor(instanceId, ["parked"]);
    const w = await why(instanceId, careless.edda);
    expect(w.reason).toMatchObject({ kind: "parked" });
    if (w.reason.kind !== "parked") throw new Error("unreachable");
    expect(w.reason.facts.error).toMatch(/why_step_b|why_step_c/);
    expect(w.reason.facts.parkedHash).toBe(w.reason.facts.deployedHash);
    expect(w.reason.next).toContain("deploy code whose replay matches");
    // Where other code is deployed (app A runs v1), the sweep resumes it.
    expect((await why(instanceId)).reason.next).toContain("the next sweep resumes it");
  });

  it("quarantined: the poison reason, and what an operator does", async () => {
    const instanceId = "why-poison-1";
    await a.edda.start(poisoned, undefined, { instanceId });
    for (let i = 0; i < 40 && (await a.edda.getInstance(instanceId))!.status !== "quarantined"; i++) {
      await a.dispatcher.idle();
      await a.edda.sweep({ resumeIdleSeconds: 0 });
      await new Promise((r) => setTimeout(r, 30));
    }
    const w = await why(instanceId);
    expect(w).toMatchObject({ status: "quarantined", reason: { kind: "quarantined", facts: { task: "step", attempts: 2, previousStatus: "running" } } });
    expect(w.reason.detail).toContain("refused history of why-poison-1");
    expect(w.reason.next).toContain(`POST /instances/${instanceId}/resume`);
  });

  it("none for a finished instance; 404 problem for an unknown one, changing nothing", async () => {
    const res = await api(a.edda, "/instances/no-such-instance/why");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    expect(await res.json()).toMatchObject({ status: 404, error_type: "NotFoundError" });
    const res2 = await api(a.edda, "/instances/%00/why");
    expect(res2.status).toBeLessThan(500);
    expect(res2.status).toBeGreaterThanOrEqual(400);
  });

  it("the metrics' reasons (one statement over the rows) agree with the route on every unfinished instance; /readyz details the expired leases", { timeout: 30_000 }, async () => {
    // A lease left by a dead engine on an instance app A runs (so it is leased, not pinned, there).
    const { instanceId } = await dropping.start(stuck, undefined);
    await leaseAndDie(droppingDb, instanceId, 1);
    await new Promise((r) => setTimeout(r, 1_200));
    await a.dispatcher.idle();
    const unfinished = (await a.edda.findInstances({ limit: 200 })).instances.filter((i) => !["completed", "failed", "cancelled"].includes(i.status));
    const expected = new Map<string, number>();
    for (const i of unfinished) {
      const key = `${i.status}|${(await why(i.instanceId)).reason.kind}`;
      expected.set(key, (expected.get(key) ?? 0) + 1);
    }
    const sample = await createStorage(a.database).sampleGauges(10, WORKFLOWS.map((w) => w.workflowName));
    const sampled = new Map(sample.reasons.map((r) => [`${r.status}|${r.reason}`, r.count]));
    expect(sampled).toEqual(expected);
    // Most kinds produced above are still there to compare (the quarantine test's sweeps moved the parked and leased ones on).
    expect(new Set(sample.reasons.map((r) => r.reason))).toEqual(new Set(["timer", "message", "event", "child", "webhook", "concurrency", "rate_limit", "debounce", "retry_backoff", "leased", "pinned", "quarantined"]));
    // The quarantine test's sweeps ran: the reason says when the stale-lease task last ran.
    const stale = await why(instanceId);
    expect(stale.reason).toMatchObject({ kind: "leased", facts: { lastSweepAt: expect.any(String) } });
    expect(stale.reason.detail).toMatch(/the sweep's stale_leases task last ran \d+ s ago/);
    const leased = sample.reasons.find((r) => r.reason === "leased")!;
    expect(leased.oldestSeconds).toBeGreaterThan(0);
    const ready = await a.edda.fetch(new Request("http://localhost/readyz"));
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { status: string; leases: { expired: number; oldestExpiredSeconds: number }; sweep: { lastRunAt: string | null } };
    near(body.sweep.lastRunAt ?? undefined, Date.now());
    expect(body).toMatchObject({ status: "ready", database: "writable", leases: { expired: leased.count } });
    expect(body.leases.oldestExpiredSeconds).toBeGreaterThan(0);
  });
});
