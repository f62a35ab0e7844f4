// The viewer's operator pages, server side on real Postgres (app.request):
// the Schedules page (next and last run), the Outbox page (dead letters with
// their error; redeliver and discard as same-origin forms; refused, unknown
// and cross-origin actions change nothing), the `queued` status (filter,
// badge, the concurrency key on the instance page), and two regressions the
// poison suite found (`?range=__proto__`, `?notice=constructor` were 500s).
// The browser suite (test/ui/viewer.browser.test.ts) clicks the same pages.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accountSync } from "../../functions/workflows/account-sync.ts";
import { dailyReport } from "../../functions/workflows/daily-report.ts";
import { activity, sendEventTransactional, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { startTestBroker, type TestBroker } from "../support/broker.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const ORIGIN = "http://localhost";
const announceStep = activity("vo_announce", (ctx, type: string) => sendEventTransactional(ctx, { type, source: "/viewer", data: { type } }));
const announce = workflow("vo_announce", async (ctx, type: string) => announceStep(ctx, type));

let t: TestApp;
let broker: TestBroker;
const page = async (path: string) => {
  const res = await t.edda.app.request(path);
  return { status: res.status, html: await res.text() };
};
const post = (path: string, headers: Record<string, string> = { origin: ORIGIN }) =>
  t.edda.app.request(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body: "" });
const outboxRows = () => queryRows<{ event_id: string; status: string; retry_count: number }>(t.database.db, sql`SELECT event_id, status, retry_count FROM outbox_events ORDER BY event_id`);
const statusOf = async (id: string) => (await outboxRows()).find((r) => r.event_id === id)?.status ?? null;

/** An event the broker refuses: `invalid` after the post-commit relay. */
async function refusedEvent(type: string): Promise<string> {
  broker.refusing = true;
  const { instanceId } = await t.edda.start(announce, type);
  const id = (await t.waitFor(instanceId)).output as string;
  await expect.poll(() => statusOf(id), { timeout: 10_000 }).toBe("invalid");
  broker.refusing = false;
  return id;
}

beforeAll(async () => {
  broker = await startTestBroker();
  t = makeTestApp(await openTestDatabase("postgres-js", "viewerops"), { workflows: [announce, accountSync, dailyReport], brokerUrl: broker.url });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
  await broker.stop();
});

describe("viewer: schedules", () => {
  it("lists each scheduled workflow with its cron, zone, policy and next run, linked from the navigation", async () => {
    const r = await page("/ui/schedules");
    expect(r.status).toBe(200);
    expect(r.html).toContain('href="/ui/schedules"');
    expect(r.html).toContain("daily_report");
    expect(r.html).toContain("0 9 * * *");
    expect(r.html).toContain("Europe/Berlin");
    const [row] = await queryRows<{ next_run_at: string }>(t.database.db, sql`SELECT to_char(next_run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') AS next_run_at FROM workflow_schedules WHERE workflow_name = 'daily_report'`);
    expect(r.html).toContain(row!.next_run_at);
    expect(r.html).toContain("not yet");
  });
});

describe("viewer: outbox dead letters", () => {
  it("lists a refused event with its error; redeliver re-arms it and the broker gets it once", async () => {
    const id = await refusedEvent("ok.viewer");
    const list = await page("/ui/outbox");
    expect(list.status).toBe(200);
    expect(list.html).toContain(id);
    expect(list.html).toContain("broker answered HTTP 422");
    expect(list.html).toContain('class="badge s-invalid"');
    expect((await page("/ui/outbox?status=expired")).html).not.toContain(id);

    const r = await post(`/ui/outbox/${encodeURIComponent(id)}/redeliver`);
    expect(r.status).toBe(303);
    expect(r.headers.get("location")).toBe("/ui/outbox?notice=redelivered");
    await expect.poll(() => statusOf(id), { timeout: 10_000 }).toBe("published");
    expect(broker.deliveries(id).map((d) => d.status)).toEqual([422, 200]);
    expect((await page("/ui/outbox?notice=redelivered")).html).toContain("Event re-armed");

    // not a dead letter any more: the page again, with the conflict, and nothing changes
    const again = await post(`/ui/outbox/${encodeURIComponent(id)}/redeliver`);
    expect(again.status).toBe(409);
    expect(await again.text()).toContain("is published, not a dead letter");
    expect(await statusOf(id)).toBe("published");
    expect(broker.deliveries(id)).toHaveLength(2);
  });

  it("discards a dead letter; unknown ids, cross-origin posts and stale cursors change nothing", async () => {
    const id = await refusedEvent("ok.discard");
    const before = await outboxRows();
    expect((await post(`/ui/outbox/${encodeURIComponent(id)}/discard`, { "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect((await post(`/ui/outbox/${encodeURIComponent(id)}/redeliver`, {})).status).toBe(403);
    expect((await post("/ui/outbox/no-such-event/discard")).status).toBe(404);
    expect(await outboxRows()).toEqual(before);
    const stale = await page("/ui/outbox?cursor=garbage");
    expect(stale.status).toBe(200);
    expect(stale.html).toContain("no longer valid");

    const r = await post(`/ui/outbox/${encodeURIComponent(id)}/discard`);
    expect(r.headers.get("location")).toBe("/ui/outbox?notice=discarded");
    expect(await statusOf(id)).toBeNull();
    expect((await page("/ui/outbox")).html).not.toContain(id);
  });
});

describe("viewer: queued instances", () => {
  it("filters by queued, shows the badge and, on the instance page, the concurrency key it waits for", async () => {
    const first = await t.edda.start("account_sync", { account: "acct-v", seconds: 60 });
    const second = await t.edda.start("account_sync", { account: "acct-v", seconds: 0 });
    await expect.poll(async () => (await t.edda.getInstance(second.instanceId))?.status).toBe("queued");
    const list = await page("/ui?status=queued");
    expect(list.html).toContain(`/ui/instances/${encodeURIComponent(second.instanceId)}`);
    expect(list.html).not.toContain(`/ui/instances/${encodeURIComponent(first.instanceId)}"`);
    expect(list.html).toContain('class="badge s-queued"');
    expect(list.html).toContain('data-status="queued"');
    const inst = await page(`/ui/instances/${encodeURIComponent(second.instanceId)}`);
    expect(inst.html).toContain('id="queued"');
    expect(inst.html).toContain("waits for a slot of concurrency key <code>acct-v</code>");
    await t.edda.cancel(first.instanceId);
  });

  it("regressions: ?range=__proto__ and ?notice=constructor render the page (were 500s)", async () => {
    for (const path of ["/ui?range=__proto__", "/ui?range=constructor", "/ui/channels?notice=constructor", "/ui/instances/x?notice=__proto__", "/ui/outbox?notice=toString"]) {
      expect([200, 404], path).toContain((await page(path)).status);
    }
    expect((await page("/ui?range=__proto__")).status).toBe(200);
  });
});
