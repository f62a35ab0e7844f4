// The whole history, streamed: GET /instances/:id/history?format=ndjson
// across many pages (more entries than one page holds) equals the paged
// API's pages joined; the viewer's "download JSON" is the same entries as one
// JSON array. And the viewer's received-events page: each accepted
// CloudEvent once (a duplicate is not listed twice) with its id, source,
// type and time, and the instances it woke (an event-handler start, a
// waiting instance). On real Postgres.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, waitEvent, workflow } from "../../src/index.ts";
import { HISTORY_PAGE_MAX } from "../../src/engine/engine.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "history-export-token";
const STEPS = 620; // more than one page of HISTORY_PAGE_MAX entries
const tick = activity("hx_tick", async (_ctx, n: number) => ({ n, note: `entry ${n}` }));
const long = workflow("hx_long", async (ctx) => {
  const batch = [];
  for (let i = 0; i < STEPS; i++) batch.push(tick(ctx, i));
  return (await Promise.all(batch)).length;
});
const onPing = workflow("hx.ping", { eventHandler: true }, async (_ctx, input: unknown) => input);
const waiter = workflow("hx_waiter", async (ctx) => (await waitEvent(ctx, "hx.done", { timeoutSeconds: 600 })).data);
let t: TestApp;

const auth = { authorization: `Bearer ${TOKEN}` };
const get = (path: string) => t.edda.app.request(path, { headers: auth });
const postEvent = (body: unknown) => t.edda.app.request("/events", { method: "POST", headers: { ...auth, "content-type": "application/cloudevents+json" }, body: JSON.stringify(body) });

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("postgres-js", "history_export"), { workflows: [long, onPing, waiter], apiToken: TOKEN });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("history export", () => {
  it("streams every page as NDJSON, equal to the paged history; the viewer's download is the same as a JSON array", async () => {
    const { instanceId } = await t.edda.start("hx_long", null, { instanceId: "hx-long-1" });
    expect((await t.waitFor(instanceId, ["completed"], 60_000)).output).toBe(STEPS);

    const paged: unknown[] = [];
    for (let after: string | null = ""; after !== null; ) {
      const page = (await (await get(`/instances/${instanceId}/history?limit=${HISTORY_PAGE_MAX}${after ? `&after=${after}` : ""}`)).json()) as { history: unknown[]; nextCursor: string | null };
      paged.push(...page.history);
      after = page.nextCursor;
    }
    expect(paged.length).toBeGreaterThan(HISTORY_PAGE_MAX);

    const res = await get(`/instances/${instanceId}/history?format=ndjson`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    const text = await res.text();
    expect(text.endsWith("\n")).toBe(true);
    const lines = text.trimEnd().split("\n").map((l) => JSON.parse(l) as { id: number });
    expect(lines).toEqual(paged);
    expect(lines.map((l) => l.id)).toEqual([...lines.map((l) => l.id)].sort((a, b) => a - b));

    const download = await get(`/ui/instances/${instanceId}/history.json`);
    expect(download.status).toBe(200);
    expect(download.headers.get("content-disposition")).toBe('attachment; filename="hx-long-1-history.json"');
    expect(await download.json()).toEqual(paged);
    // the instance page links to it
    expect(await (await get(`/ui/instances/${instanceId}`)).text()).toContain(`href="/ui/instances/${instanceId}/history.json"`);
  });

  it("refuses an unknown instance, and serves the next request (bad parameters: history-requests.unit.test.ts)", async () => {
    expect((await get("/instances/hx-nobody/history?format=ndjson")).status).toBe(404);
    expect((await get("/ui/instances/hx-nobody/history.json")).status).toBe(404);
    const { instanceId } = await t.edda.start("hx.ping", { ok: 1 });
    await t.waitFor(instanceId);
    expect((await (await get(`/instances/${instanceId}/history?format=ndjson`)).text()).trimEnd().split("\n").length).toBeGreaterThan(0);
  });
});

describe("received events page", () => {
  it("lists each accepted event once with id, source, type, time, and the instances it woke", async () => {
    const w = await t.edda.start("hx_waiter", null, { instanceId: "hx-waiter-1" });
    await t.waitFor(w.instanceId, ["waiting_for_message"]);
    const ping = { specversion: "1.0", type: "hx.ping", source: "/hx/test", id: "hx-ev-ping", time: "2026-12-01T10:00:00Z", data: { n: 1 } };
    expect((await postEvent(ping)).status).toBe(202);
    expect((await postEvent(ping)).status).toBe(202); // a duplicate: accepted, stored once
    expect((await postEvent({ specversion: "1.0", type: "hx.done", source: "/hx/test", id: "hx-ev-done", data: "finished" })).status).toBe(202);
    expect((await postEvent({ specversion: "1.0", type: "hx.nobody", source: "/hx/other", id: "hx-ev-lonely" })).status).toBe(202);
    expect((await t.waitFor(w.instanceId)).output).toBe("finished");
    await t.dispatcher.idle();

    const res = await get("/ui/events");
    expect(res.status).toBe(200);
    const html = await res.text();
    const row = (id: string) => {
      const m = new RegExp(`<tr[^>]*>(?:(?!</tr>).)*?${id}(?:(?!</tr>).)*</tr>`, "s").exec(html);
      expect(m, id).not.toBeNull();
      return m![0];
    };
    expect(html.match(/hx-ev-ping/g)).toHaveLength(1);
    const pingRow = row("hx-ev-ping");
    expect(pingRow).toContain("/hx/test");
    expect(pingRow).toContain("hx.ping");
    expect(pingRow).toContain("2026-12-01T10:00:00Z");
    const started = (await t.edda.findInstances({ workflowName: "hx.ping" })).instances.map((i) => i.instanceId);
    expect(started.some((id) => pingRow.includes(`/ui/instances/${encodeURIComponent(id)}`))).toBe(true);
    expect(row("hx-ev-done")).toContain(`href="/ui/instances/hx-waiter-1"`);
    expect(row("hx-ev-lonely")).toContain("none");
    // a hostile cursor shows the newest page
    expect((await get("/ui/events?cursor=%5B%22x%22%5D")).status).toBe(200);
    expect((await get(`/ui/events?cursor=${encodeURIComponent(JSON.stringify(["2999-01-01T00:00:00Z", "", ""]))}`)).status).toBe(200);
  });
});
