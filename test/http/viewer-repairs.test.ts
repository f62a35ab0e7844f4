// The viewer's repair actions, server side on real Postgres (app.request):
// Rerun on a finished instance and "fork from here" on a timeline entry are
// same-origin form posts that redirect to the new instance, linked to the
// original (rerunOf / forkOf). Cross-origin posts, a missing or unknown fork
// point and a live instance are refused and start nothing. The browser suite
// (test/ui/viewer.browser.test.ts) clicks the same buttons. The Schedules
// page pauses, resumes and triggers a schedule the same way; the list's bulk
// bar counts first (a dry run that changes nothing), then confirms.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, TerminalError, waitMessage, workflow } from "../../src/index.ts";
import { engineOf } from "../../src/edda.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const ORIGIN = "http://localhost";
let down = true;
const first = activity("vr_first", async () => "a");
const flaky = activity("vr_flaky", async () => {
  if (down) throw new TerminalError("partner down");
  return "b";
});
const ship = workflow("vr_ship", { input: z.object({ order: z.string() }) }, async (ctx, input) => `${await first(ctx)}${await flaky(ctx)}:${input.order}`);
const waiter = workflow("vr_wait", async (ctx) => waitMessage(ctx, "vr-go"));
const hold = workflow("vr_hold", async (ctx) => waitMessage(ctx, "vr-hold"));
const nightly = workflow("vr_nightly", { schedule: "0 3 * * *" }, async () => "ran");

let t: TestApp;
const post = (path: string, body: Record<string, string> = {}, headers: Record<string, string> = { origin: ORIGIN }) =>
  t.edda.app.request(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body: new URLSearchParams(body).toString() });
const instanceIds = async () => (await queryRows<{ instance_id: string }>(t.database.db, sql`SELECT instance_id FROM workflow_instances ORDER BY instance_id`)).map((r) => r.instance_id);
const ops = async () => (await engineOf(t.edda)).listBulkOperations(100);
const newIdFrom = (res: Response) => decodeURIComponent(new URL(res.headers.get("location")!, ORIGIN).pathname.split("/").pop()!);

async function failedShip(order: string) {
  down = true;
  const { instanceId } = await t.edda.start(ship, { order });
  const view = await t.waitFor(instanceId);
  expect(view.status).toBe("failed");
  return { instanceId, flakyId: view.history!.find((e) => e.activityId.startsWith("vr_flaky"))!.activityId };
}

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("postgres-js", "viewerrepairs"), { workflows: [ship, waiter, hold, nightly] });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("viewer: rerun and fork", () => {
  it("shows Rerun and fork-from-here on a failed instance; Rerun redirects to a new instance linked by rerunOf", async () => {
    const { instanceId, flakyId } = await failedShip("r1");
    const html = await (await t.edda.app.request(`/ui/instances/${instanceId}`)).text();
    expect(html).toContain('id="rerun-form"');
    expect(html).toContain(`name="fromActivityId" value="${flakyId}"`);
    down = false;
    const res = await post(`/ui/instances/${instanceId}/rerun`);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toMatch(/\?notice=rerun$/);
    const rerunId = newIdFrom(res);
    expect(rerunId).not.toBe(instanceId);
    expect(await t.waitFor(rerunId)).toMatchObject({ status: "completed", output: "ab:r1", rerunOf: instanceId, forkOf: null });
    const page = await (await t.edda.app.request(res.headers.get("location")!)).text();
    expect(page).toContain("Rerun started");
    expect(page).toContain(`id="rerun-of" href="/ui/instances/${instanceId}"`);
    expect((await t.edda.getInstance(instanceId))!.status).toBe("failed");
  });

  it("fork from here redirects to a new instance linked by forkOf that resumes at the entry", async () => {
    const { instanceId, flakyId } = await failedShip("f1");
    down = false;
    const res = await post(`/ui/instances/${instanceId}/fork`, { fromActivityId: flakyId });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toMatch(/\?notice=forked$/);
    const forkId = newIdFrom(res);
    expect(await t.waitFor(forkId)).toMatchObject({ status: "completed", output: "ab:f1", forkOf: { instanceId, fromActivityId: flakyId }, rerunOf: null });
    expect(await (await t.edda.app.request(`/ui/instances/${forkId}`)).text()).toContain('id="fork-of"');
  });

  it("refuses cross-origin posts, a missing or unknown fork point and a live instance, starting nothing", async () => {
    const { instanceId, flakyId } = await failedShip("x1");
    const live = await t.edda.start(waiter, null);
    await expect.poll(async () => (await t.edda.getInstance(live.instanceId))?.status).toBe("waiting_for_message");
    const before = await instanceIds();
    expect((await post(`/ui/instances/${instanceId}/rerun`, {}, {})).status).toBe(403);
    expect((await post(`/ui/instances/${instanceId}/rerun`, {}, { origin: "http://evil.example" })).status).toBe(403);
    expect((await post(`/ui/instances/${instanceId}/fork`, { fromActivityId: flakyId }, { "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect((await post(`/ui/instances/${instanceId}/fork`, {})).status).toBe(422);
    expect((await post(`/ui/instances/${instanceId}/fork`, { fromActivityId: "no_such:1" })).status).toBe(422);
    expect((await post("/ui/instances/no-such-instance/rerun")).status).toBe(404);
    const liveRerun = await post(`/ui/instances/${live.instanceId}/rerun`);
    expect(liveRerun.status).toBe(409);
    expect(await liveRerun.text()).toContain('id="status"');
    expect((await post(`/ui/instances/${live.instanceId}/fork`, { fromActivityId: "x:1" })).status).toBeGreaterThanOrEqual(409);
    expect(await instanceIds()).toEqual(before);
    // a live instance offers neither action; valid traffic still flows
    const html = await (await t.edda.app.request(`/ui/instances/${live.instanceId}`)).text();
    expect(html).not.toContain('id="rerun-form"');
    expect(html).not.toContain('data-action="fork"');
    down = false;
    expect((await post(`/ui/instances/${instanceId}/rerun`)).status).toBe(303);
    expect((await instanceIds()).length).toBe(before.length + 1);
    await t.edda.cancel(live.instanceId);
  });
});

describe("viewer: schedule control", () => {
  const pausedAt = async () => (await queryRows<{ paused_at: string | null }>(t.database.db, sql`SELECT paused_at FROM workflow_schedules WHERE workflow_name = 'vr_nightly'`))[0]?.paused_at ?? null;

  it("pauses, shows it paused, resumes; Trigger now starts one instance and redirects to it", async () => {
    const list = await (await t.edda.app.request("/ui/schedules")).text();
    expect(list).toContain('action="/ui/schedules/vr_nightly/pause"');
    expect(list).not.toContain('action="/ui/schedules/vr_nightly/resume"');

    const paused = await post("/ui/schedules/vr_nightly/pause");
    expect(paused.status).toBe(303);
    expect(paused.headers.get("location")).toBe("/ui/schedules?notice=paused");
    expect(await pausedAt()).not.toBeNull();
    const shown = await (await t.edda.app.request("/ui/schedules?notice=paused")).text();
    expect(shown).toContain("Schedule paused");
    expect(shown).toContain('class="badge s-paused"');
    expect(shown).toContain('action="/ui/schedules/vr_nightly/resume"');

    const triggered = await post("/ui/schedules/vr_nightly/trigger");
    expect(triggered.status).toBe(303);
    const id = newIdFrom(triggered);
    expect(id).toMatch(/^schedule:vr_nightly:manual:/);
    expect(await t.waitFor(id)).toMatchObject({ status: "completed", output: "ran" });

    expect((await post("/ui/schedules/vr_nightly/resume")).headers.get("location")).toBe("/ui/schedules?notice=schedule-resumed");
    expect(await pausedAt()).toBeNull();
  });

  it("refuses cross-origin control posts and unknown schedules, changing nothing", async () => {
    const before = await instanceIds();
    expect((await post("/ui/schedules/vr_nightly/pause", {}, {})).status).toBe(403);
    expect((await post("/ui/schedules/vr_nightly/trigger", {}, { origin: "http://evil.example" })).status).toBe(403);
    expect((await post("/ui/schedules/vr_ship/pause")).status).toBe(404);
    expect((await post("/ui/schedules/no_such/trigger")).status).toBe(404);
    expect(await pausedAt()).toBeNull();
    expect(await instanceIds()).toEqual(before);
  });
});

describe("viewer: bulk actions", () => {
  const hiddenFields = (html: string) => Object.fromEntries([...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map((m) => [m[1]!, m[2]!.replaceAll("&amp;", "&")]));
  const statuses = async (ids: string[]) => Promise.all(ids.map(async (id) => (await t.edda.getInstance(id))!.status));

  it("the list's bulk bar counts the filter (changing nothing), then the confirm cancels exactly those and shows progress", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await t.edda.start(hold, null)).instanceId);
    const other = (await t.edda.start(waiter, null)).instanceId;
    await expect.poll(() => statuses([...ids, other])).toEqual(Array(4).fill("waiting_for_message"));

    const list = await (await t.edda.app.request("/ui?workflow=vr_hold&status=waiting_for_message")).text();
    expect(list).toContain('id="bulk-form"');
    expect(list).toContain('<input type="hidden" name="workflow" value="vr_hold"');
    const dry = await t.edda.app.request("/ui/bulk?workflow=vr_hold&status=waiting_for_message&action=cancel");
    expect(dry.status).toBe(200);
    const html = await dry.text();
    expect(html).toMatch(/id="bulk-count"><strong>3<\/strong> instances match now/);
    expect(await ops()).toHaveLength(0);
    expect(await statuses(ids)).toEqual(Array(3).fill("waiting_for_message"));

    const fields = hiddenFields(html);
    expect(fields).toMatchObject({ workflow: "vr_hold", status: "waiting_for_message", action: "cancel" });
    const res = await post("/ui/bulk", fields);
    expect(res.status).toBe(303);
    const location = res.headers.get("location")!;
    expect(location).toMatch(/^\/ui\/operations\/[^?]+\?notice=bulk$/);
    await expect.poll(() => statuses(ids), { timeout: 10_000 }).toEqual(Array(3).fill("cancelled"));
    expect((await t.edda.getInstance(other))!.status).toBe("waiting_for_message");
    await expect.poll(async () => (await (await t.edda.app.request(location)).text()).includes('id="op-status">completed'), { timeout: 10_000 }).toBe(true);
    const progress = await (await t.edda.app.request(location)).text();
    expect(progress).toContain('id="op-total">3');
    expect(progress).toContain('id="op-done">3');
    expect(progress).toContain('id="op-skipped">0');
    // the same confirm again (a double submit) finds the same operation
    expect((await post("/ui/bulk", fields)).headers.get("location")).toBe(location);
    expect(await ops()).toHaveLength(1);
    const listed = await (await t.edda.app.request("/ui/operations")).text();
    expect(listed).toContain(`href="${location.replace(/\?.*$/, "")}"`);
    expect(listed).toContain("3 / 3");
    await t.edda.cancel(other);
  });

  it("refuses cross-origin and malformed bulk posts, creating no operation", async () => {
    const before = (await ops()).length;
    const fields = { workflow: "vr_hold", action: "cancel", requestId: "ui-hostile" };
    expect((await post("/ui/bulk", fields, {})).status).toBe(403);
    expect((await post("/ui/bulk", fields, { origin: "http://evil.example" })).status).toBe(403);
    expect((await post("/ui/bulk", { ...fields, action: "delete" })).status).toBe(422);
    expect((await post("/ui/bulk", { ...fields, status: "running,bogus" })).status).toBe(422);
    expect((await post("/ui/bulk", { ...fields, startedAfter: "yesterday" })).status).toBe(422);
    expect((await t.edda.app.request("/ui/bulk?workflow=vr_hold")).status).toBe(400);
    expect((await t.edda.app.request("/ui/operations/no-such-op")).status).toBe(404);
    expect(await ops()).toHaveLength(before);
  });
});
