// Poison isolation on real Postgres, in every task that picks rows: a row
// that keeps failing is counted on its instance, quarantined at the limit
// with its error visible (API, list filter), never blocks the other rows or
// tasks, and an operator can resume or cancel it. The faults are real:
// database triggers that refuse one instance's rows. (A value that cannot be
// stored is not such a fault: it fails the run once, see unstorable-values.test.ts.)
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, receive, sleep, subscribe, waitMessage, workflow } from "../../src/index.ts";
import type { SweepReport } from "../../src/engine/sweeper.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "quarantine-token";
const MAX = 3;
let t: TestApp;

const echo = activity("q_echo", async (_ctx, n: number) => n + 1);
const simple = workflow("q_simple", async (ctx, n: number) => echo(ctx, n));
// Its instances' activity results are refused by the database (q_poison): every step throws while concluding.
const refused = workflow("q_refused", async (ctx) => echo(ctx, 1));
const napper = workflow("q_napper", async (ctx) => {
  await sleep(ctx, 0);
  return "woke";
});
const listener = workflow("q_listener", async (ctx) => {
  await subscribe(ctx, "q-news", "broadcast");
  const m = await receive(ctx, "q-news", { timeoutSeconds: 3600 });
  return m.data;
});
const waiter = workflow("q_waiter", async (ctx, seconds: number) => {
  try {
    return await waitMessage(ctx, "q-reply", { timeoutSeconds: seconds });
  } catch {
    return "timed out";
  }
});

const api = (path: string, init: RequestInit = {}) =>
  t.edda.app.request(path, { ...init, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...(init.headers as Record<string, string>) } });
const view = async (id: string) => (await (await api(`/instances/${id}`)).json()) as { status: string; failure: { task: string; errorType: string; message: string; attempts: number; previousStatus: string | null } | null };
const sweep = () => t.edda.sweep({ resumeIdleSeconds: 0 });
const noTaskFailed = (r: SweepReport) => expect(r.failures).toEqual([]);

/** Sweep until `done` holds (each sweep must complete every task). */
async function sweepUntil(done: () => Promise<boolean>, reports: SweepReport[] = [], max = 40): Promise<SweepReport[]> {
  for (let i = 0; i < max; i++) {
    await t.dispatcher.idle();
    if (await done()) return reports;
    const r = await sweep();
    noTaskFailed(r);
    reports.push(r);
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
  throw new Error("condition not reached");
}

beforeAll(async () => {
  const database = await openTestDatabase("postgres-js", "quarantine");
  t = makeTestApp(database, { workflows: [simple, refused, napper, listener, waiter], apiToken: TOKEN, quarantineAfterFailures: MAX });
  // Real database faults: rows of instances named in q_poison are refused.
  await database.db.execute(sql`CREATE TABLE q_poison (instance_id text PRIMARY KEY, on_event text)`);
  await database.db.execute(sql`
    CREATE FUNCTION q_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM q_poison p WHERE p.instance_id = OLD.instance_id AND p.on_event = 'delete') THEN RAISE EXCEPTION 'refused delete of %', OLD.instance_id; END IF;
        RETURN OLD;
      END IF;
      IF EXISTS (SELECT 1 FROM q_poison p WHERE p.instance_id = NEW.instance_id AND p.on_event = NEW.event_type) THEN
        RAISE EXCEPTION 'refused % for %', NEW.event_type, NEW.instance_id;
      END IF;
      RETURN NEW;
    END $$`);
  await database.db.execute(sql`CREATE TRIGGER q_refuse_history BEFORE INSERT ON workflow_history FOR EACH ROW EXECUTE FUNCTION q_refuse()`);
  await database.db.execute(sql`CREATE TRIGGER q_refuse_delete BEFORE DELETE ON workflow_instances FOR EACH ROW EXECUTE FUNCTION q_refuse()`);
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

const poison = (instanceId: string, onEvent: string) => t.database.db.execute(sql`INSERT INTO q_poison VALUES (${instanceId}, ${onEvent})`);
const cure = (instanceId: string) => t.database.db.execute(sql`DELETE FROM q_poison WHERE instance_id = ${instanceId}`);

describe("a step that keeps throwing", () => {
  it("is quarantined after the limit with its error, listed by status; valid instances complete; resume retries it, cancel ends it", async () => {
    await poison("q-bad-1", "ActivityCompleted");
    await poison("q-bad-2", "ActivityCompleted");
    const bad = await t.edda.start("q_refused", null, { instanceId: "q-bad-1" });
    const bad2 = await t.edda.start("q_refused", null, { instanceId: "q-bad-2" });
    const good = await Promise.all([1, 2, 3].map((n) => t.edda.start("q_simple", n)));
    const reports = await sweepUntil(async () => (await view(bad.instanceId)).status === "quarantined" && (await view(bad2.instanceId)).status === "quarantined");
    for (const g of good) expect((await t.waitFor(g.instanceId)).status).toBe("completed");
    // every sweep completed every task; no valid instance was ever counted
    for (const r of reports) expect(r.rowFailures.filter((f) => !f.instanceId.startsWith("q-bad"))).toEqual([]);

    const v = await view(bad.instanceId);
    expect(v.failure).toMatchObject({ task: "step", errorType: "PostgresError", attempts: MAX, previousStatus: "running" });
    expect(v.failure!.message).toMatch(/refused ActivityCompleted for q-bad-1/);
    const body = JSON.stringify(v);
    expect(body).not.toMatch(/\n\s+at /);

    const listed = (await (await api("/instances?status=quarantined")).json()) as { instances: { instanceId: string; failure: unknown }[] };
    expect(listed.instances.map((i) => i.instanceId).sort()).toEqual(["q-bad-1", "q-bad-2"]);
    expect(listed.instances[0]!.failure).toMatchObject({ task: "step" });

    // nothing picks it any more: more sweeps dispatch nothing for it and count nothing
    const quiet = await sweep();
    noTaskFailed(quiet);
    expect(quiet.rowFailures).toEqual([]);
    expect((await view(bad.instanceId)).status).toBe("quarantined");

    // resume: back to running, counted from zero, quarantined again after as many failures
    const resumed = await api(`/instances/${bad.instanceId}/resume`, { method: "POST" });
    expect(resumed.status).toBe(200);
    expect(await resumed.json()).toEqual({ status: "running" });
    expect((await api(`/instances/${bad.instanceId}/resume`, { method: "POST" })).status).toBe(409);
    expect((await api(`/instances/nope/resume`, { method: "POST" })).status).toBe(404);
    await sweepUntil(async () => (await view(bad.instanceId)).status === "quarantined");

    // cancel: the other way out
    const cancelled = await api(`/instances/${bad2.instanceId}/cancel`, { method: "POST" });
    expect(await cancelled.json()).toEqual({ status: "cancelled" });
    expect((await view(bad2.instanceId)).status).toBe("cancelled");
  });
});

describe("the viewer", () => {
  it("shows a quarantined instance's failure, lists it under its status, and resumes it from the page", async () => {
    await poison("q-bad-ui", "ActivityCompleted");
    const bad = await t.edda.start("q_refused", null, { instanceId: "q-bad-ui" });
    await sweepUntil(async () => (await view(bad.instanceId)).status === "quarantined");
    const auth = { authorization: `Bearer ${TOKEN}` };
    const page = await t.edda.app.request(`/ui/instances/${bad.instanceId}`, { headers: auth });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('id="failure"');
    expect(html).toContain("Quarantined");
    expect(html).toMatch(/refused ActivityCompleted for q-bad-ui/);
    expect(html).toContain(`/ui/instances/${bad.instanceId}/resume`);
    const list = await (await t.edda.app.request("/ui?status=quarantined", { headers: auth })).text();
    expect(list).toContain(bad.instanceId);

    const resumed = await t.edda.app.request(`/ui/instances/${bad.instanceId}/resume`, { method: "POST", headers: { ...auth, "sec-fetch-site": "same-origin" } });
    expect(resumed.status).toBe(303);
    expect((await view(bad.instanceId)).status).not.toBe("quarantined");
    await sweepUntil(async () => (await view(bad.instanceId)).status === "quarantined");
    await api(`/instances/${bad.instanceId}/cancel`, { method: "POST" });
    // a resume of what is not quarantined re-renders the page with the problem
    const refused = await t.edda.app.request(`/ui/instances/${bad.instanceId}/resume`, { method: "POST", headers: { ...auth, "sec-fetch-site": "same-origin" } });
    expect(refused.status).toBe(409);
  });
});

describe("sweep tasks", () => {
  it("timers: a timer that cannot be recorded fails alone; the others fire; resumed after the fault is gone, it fires", async () => {
    await poison("q-nap-bad", "TimerExpired");
    const bad = await t.edda.start("q_napper", null, { instanceId: "q-nap-bad" });
    const good = await Promise.all([1, 2, 3, 4].map(() => t.edda.start("q_napper", null)));
    const reports = await sweepUntil(async () => (await view(bad.instanceId)).status === "quarantined");
    for (const g of good) expect((await t.waitFor(g.instanceId)).output).toBe("woke");
    const failures = reports.flatMap((r) => r.rowFailures);
    expect(failures.length).toBeGreaterThan(0);
    expect(new Set(failures.map((f) => `${f.task}:${f.instanceId}`))).toEqual(new Set(["timers:q-nap-bad"]));
    expect((await view(bad.instanceId)).failure).toMatchObject({ task: "timers", previousStatus: "waiting_for_timer" });

    await cure("q-nap-bad");
    expect(await (await api(`/instances/q-nap-bad/resume`, { method: "POST" })).json()).toEqual({ status: "waiting_for_timer" });
    await sweepUntil(async () => (await view("q-nap-bad")).status === "completed");
  });

  it("channel delivery: a subscriber whose delivery fails is set aside; the channel's other subscribers still get every message", async () => {
    await poison("q-lis-bad", "MessageReceived");
    const bad = await t.edda.start("q_listener", null, { instanceId: "q-lis-bad" });
    const good = await Promise.all([1, 2, 3].map(() => t.edda.start("q_listener", null)));
    await sweepUntil(async () => {
      const all = await Promise.all([bad, ...good].map((s) => view(s.instanceId)));
      return all.every((v) => v.status === "waiting_for_message");
    });
    expect((await api("/channels/q-news/messages", { method: "POST", body: JSON.stringify({ data: "hello" }) })).status).toBe(202);
    await sweepUntil(async () => (await view(bad.instanceId)).status === "quarantined");
    for (const g of good) expect((await t.waitFor(g.instanceId)).output).toBe("hello");
    expect((await view(bad.instanceId)).failure).toMatchObject({ task: "channel_delivery", previousStatus: "waiting_for_message" });

    await cure("q-lis-bad");
    await api(`/instances/q-lis-bad/resume`, { method: "POST" });
    await sweepUntil(async () => (await view("q-lis-bad")).status === "completed");
  });

  it("message timeouts: a timeout that cannot be recorded fails alone; the other waits expire", async () => {
    await poison("q-wait-bad", "MessageTimeout");
    const bad = await t.edda.start("q_waiter", 0.2, { instanceId: "q-wait-bad" });
    const good = await Promise.all([1, 2].map(() => t.edda.start("q_waiter", 0.2)));
    await sweepUntil(async () => (await view(bad.instanceId)).status === "quarantined");
    for (const g of good) expect((await t.waitFor(g.instanceId)).output).toBe("timed out");
    expect((await view(bad.instanceId)).failure).toMatchObject({ task: "message_timeouts" });
  });

  it("retention: a finished instance the database refuses to delete is retried, then left out; the others go", async () => {
    const ids = await Promise.all([1, 2, 3].map((n) => t.edda.start("q_simple", n)));
    for (const s of ids) await t.waitFor(s.instanceId);
    const stuck = ids[0]!.instanceId;
    await poison(stuck, "delete");
    const ages = ids.map((s) => s.instanceId);
    await t.database.db.execute(sql`UPDATE workflow_instances SET updated_at = now() - interval '2 hours' WHERE instance_id IN (${sql.join(ages.map((i) => sql`${i}`), sql`, `)})`);
    for (let i = 0; i < MAX + 1; i++) {
      const r = await t.edda.sweep({ instanceRetentionSeconds: 3600, batchSize: 50 });
      noTaskFailed(r);
      expect(r.rowFailures.every((f) => f.instanceId === stuck && f.task === "retention")).toBe(true);
    }
    for (const other of ages.slice(1)) expect(await t.edda.getInstance(other)).toBeNull();
    const v = await view(stuck);
    expect(v.status).toBe("completed");
    expect(v.failure).toMatchObject({ task: "retention", attempts: MAX });
    // left out now: a further sweep does not try it again
    const after = await t.edda.sweep({ instanceRetentionSeconds: 3600 });
    expect(after.rowFailures).toEqual([]);
  });
});
