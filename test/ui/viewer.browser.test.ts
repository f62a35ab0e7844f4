// The viewer in a real browser: Debian's Chromium driven by playwright-core,
// against the Node server (serveNode) on a fresh Postgres database. One server
// without a token (the walk-through), one with a token (login). Screenshots of
// the main pages go to test-artifacts/ui/ (git-ignored). Any console error
// fails a test: a CSP violation of the viewer's own style or script would show
// up there.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { workflows } from "../../functions/workflows/index.ts";
import { startTestBroker, type TestBroker } from "../support/broker.ts";
import { freshPostgres } from "../support/engine.ts";
import { chromiumLaunch } from "../support/chromium.ts";

const TOKEN = "browser-token-4a7c1e9b";
const ARTIFACTS = join(import.meta.dirname, "../../test-artifacts/ui");
const HOSTILE = `<img src=x onerror="document.title='pwned'"><script>document.title='pwned'</script>`;

let open: NodeServer;
let broker: TestBroker;
let guarded: NodeServer;
let context: BrowserContext;
let profile: string;
let page: Page;
let problems: string[] = [];

const url = (s: NodeServer, path: string) => `http://127.0.0.1:${s.port}${path}`;
// caret "initial": hiding the caret injects a style, which the viewer's CSP (rightly) refuses
const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true, caret: "initial" });

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const db = await freshPostgres("viewer_browser");
  broker = await startTestBroker();
  const env = { DATABASE_URL: db.url, EDDA_SWEEP_INTERVAL_MS: "500", EDDA_BROKER_URL: broker.url };
  open = await serveNode({ workflows, env, port: 0 });
  guarded = await serveNode({ workflows, env: { ...env, EDDA_API_TOKEN: TOKEN }, port: 0 });
  profile = mkdtempSync(join(tmpdir(), "edda-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    ...(await chromiumLaunch()),
    headless: true,
    chromiumSandbox: false,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 860 },
  });
}, 60_000);

afterAll(async () => {
  await context?.close();
  await open?.close();
  await guarded?.close();
  await broker?.stop();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

beforeEach(async () => {
  problems = [];
  page = await context.newPage();
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(e.message));
  page.on("dialog", (d) => {
    problems.push(`dialog: ${d.message()}`);
    void d.dismiss();
  });
});

afterEach(async () => {
  await page.close();
  expect(problems).toEqual([]);
});

async function startFromForm(server: NodeServer, fields: Record<string, string>, failAt = ""): Promise<string> {
  await page.goto(url(server, "/ui/workflows/order_saga/start"));
  for (const [name, value] of Object.entries(fields)) await page.fill(`#f-${name}`, value);
  if (failAt) await page.selectOption("#f-failAt", failAt);
  await Promise.all([page.waitForURL(/\/ui\/instances\/[^/?]+\?notice=started$/), page.click("#start-form button[type=submit]")]);
  return decodeURIComponent(new URL(page.url()).pathname.split("/").pop()!);
}

describe("viewer in Chromium", () => {
  it("shows an instance's realtime stream live on its page: every token, the emit, the end", async () => {
    const res = await fetch(url(open, "/workflows/summarize/instances"), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { tokens: 40 } }) });
    const { instanceId } = (await res.json()) as { instanceId: string };
    await page.goto(url(open, `/ui/instances/${encodeURIComponent(instanceId)}`));
    await expect.poll(() => page.textContent("#stream [data-stream-state]"), { timeout: 15_000 }).toBe("ended: completed");
    expect(await page.isVisible("#stream")).toBe(true);
    const lines = ((await page.textContent("#stream pre")) ?? "").trim().split("\n");
    expect(lines).toHaveLength(41);
    expect(lines[0]).toMatch(/^#1 chunk \[tokens\]: durable $/);
    expect(lines[40]).toMatch(/^#41 emit \[status\]: done$/);
    await shot("instance-stream");
  });

  it("starts an order_saga from the form and watches it complete", async () => {
    await page.goto(url(open, "/ui/workflows"));
    await page.click("text=order_saga");
    // the CSP admits the viewer's own style and script: styled header, live toggle switched on by the script
    expect(await page.evaluate(() => getComputedStyle(document.querySelector("header.top")!).display)).toBe("flex");
    expect(await page.isChecked("#live")).toBe(true);
    await shot("start-form");
    const id = await startFromForm(open, { orderId: "browser-1", amount: "42" });
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).toContain("completed");
    expect(await page.textContent("#output")).toContain('"shipped"');
    expect(await page.locator("ol.timeline li[data-kind=activity]").count()).toBe(3);
    await shot("instance-completed");

    await page.goto(url(open, "/ui"));
    await expect.poll(() => page.locator(`a[href="/ui/instances/${encodeURIComponent(id)}"]`).count()).toBe(1);
  });

  it("refreshes a waiting instance's page in place until it completes (no reload)", async () => {
    await page.goto(url(open, "/ui/workflows/reminder/start"));
    await page.fill("#f-seconds", "3");
    await Promise.all([page.waitForURL(/notice=started/), page.click("#start-form button[type=submit]")]);
    await expect.poll(() => page.textContent("#status"), { timeout: 5_000 }).toContain("waiting for timer");
    expect(await page.textContent("#waiting-now")).toContain("timer sleep:1 due at");
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).toContain("completed");
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
    expect(await page.locator("ol.timeline li[data-kind=timer]").count()).toBe(1);
  });

  it("opens a failed saga and shows both compensations in the timeline, newest first", async () => {
    await startFromForm(open, { orderId: "browser-2", amount: "7" }, "shipping");
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).toContain("failed");
    const comps = page.locator("ol.timeline li[data-kind=compensation] strong");
    expect(await comps.allTextContents()).toEqual(["refund_payment", "release_inventory"]);
    expect(await page.textContent("#error")).toContain("TerminalError: no carrier available for browser-2");
    expect(await page.locator("ol.timeline li[data-kind=failed]").count()).toBe(1);
    expect(await page.locator("#compensations td:last-child").allTextContents()).toEqual(["done", "done"]);
    await shot("instance-failed");
    await page.setViewportSize({ width: 390, height: 844 });
    await page.emulateMedia({ colorScheme: "dark" });
    await shot("instance-failed-phone-dark");
  });

  it("reruns a failed saga and forks it from a timeline entry: new instances linked to it", async () => {
    const id = await startFromForm(open, { orderId: "browser-repair", amount: "9" }, "shipping");
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).toContain("failed");
    const api = async (instanceId: string) => (await (await fetch(url(open, `/instances/${encodeURIComponent(instanceId)}`))).json()) as { status: string; rerunOf: string | null; forkOf: { instanceId: string; fromActivityId: string } | null };
    await Promise.all([page.waitForURL(/\/ui\/instances\/[^/?]+\?notice=rerun$/), page.click("#rerun-form button")]);
    const rerunId = decodeURIComponent(new URL(page.url()).pathname.split("/").pop()!);
    expect(rerunId).not.toBe(id);
    expect(await page.textContent(".notice")).toContain("Rerun started");
    expect(await page.getAttribute("#rerun-of", "href")).toBe(`/ui/instances/${encodeURIComponent(id)}`);
    expect((await api(rerunId)).rerunOf).toBe(id);
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).toContain("failed");

    await page.goto(url(open, `/ui/instances/${encodeURIComponent(id)}`));
    const entry = page.locator("ol.timeline li", { has: page.locator("form[data-action=fork]") }).nth(1);
    const from = await entry.locator("input[name=fromActivityId]").inputValue();
    await Promise.all([page.waitForURL(/\?notice=forked$/), entry.locator("form[data-action=fork] button").click()]);
    const forkId = decodeURIComponent(new URL(page.url()).pathname.split("/").pop()!);
    expect(forkId).not.toBe(id);
    expect(await page.textContent("#fork-of")).toContain(from);
    expect((await api(forkId)).forkOf).toEqual({ instanceId: id, fromActivityId: from });
    expect((await api(id)).status).toBe("failed");
    await shot("instance-forked");
  });

  it("cancels an approval from its page", async () => {
    await page.goto(url(open, "/ui/workflows/approval/start"));
    await page.fill("#f-requestId", "req-browser");
    await page.fill("#f-timeoutSeconds", "600");
    await Promise.all([page.waitForURL(/notice=started/), page.click("#start-form button[type=submit]")]);
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).toContain("waiting for message");
    expect(await page.textContent("#waiting-now")).toContain("message on channel approval");
    // the action forms refresh too (while nobody types in them): the channel is prefilled with the one waited on
    await expect.poll(() => page.inputValue("#message-form input[name=channel]")).toBe("approval");
    await shot("instance-waiting");
    await Promise.all([page.waitForURL(/notice=cancelled/), page.click("#cancel-form button")]);
    expect(await page.textContent("#status")).toContain("cancelled");
    expect(await page.textContent("#cancellation")).toContain('"cancelled_by": "viewer"');
    await expect.poll(() => page.locator("#message-form").count()).toBe(0);
    expect(await page.locator("#cancel-form").count()).toBe(0);
  });

  it("bulk-cancels the filtered instances from the list: dry-run count, confirm, progress", async () => {
    const start = async (requestId: string) => {
      const res = await fetch(url(open, "/workflows/approval/instances"), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { requestId, timeoutSeconds: 600 } }) });
      return ((await res.json()) as { instanceId: string }).instanceId;
    };
    const statusOf = async (id: string) => ((await (await fetch(url(open, `/instances/${encodeURIComponent(id)}`))).json()) as { status: string }).status;
    const ids = [await start("bulk-browser-1"), await start("bulk-browser-2")];
    const spared = await start("spared-browser");
    await expect.poll(() => Promise.all([...ids, spared].map(statusOf)), { timeout: 15_000 }).toEqual(Array(3).fill("waiting_for_message"));

    await page.goto(url(open, "/ui?workflow=approval&q=bulk-browser&status=waiting_for_message"));
    expect(await page.locator("table.instances tbody tr").count()).toBe(2);
    await page.selectOption("#bulk-form select[name=action]", "cancel");
    await Promise.all([page.waitForURL(/\/ui\/bulk\?/), page.click("#bulk-form button")]);
    expect(await page.textContent("#bulk-count")).toMatch(/^2 instances match now/);
    expect(await Promise.all(ids.map(statusOf))).toEqual(["waiting_for_message", "waiting_for_message"]);
    await shot("bulk-dry-run");
    await Promise.all([page.waitForURL(/\/ui\/operations\/[^?]+\?notice=bulk$/), page.click("#bulk-confirm button")]);
    await expect.poll(() => page.textContent("#op-status"), { timeout: 15_000 }).toBe("completed");
    expect(await page.textContent("#op-total")).toBe("2");
    expect(await page.textContent("#op-done")).toBe("2");
    expect(await page.textContent("#op-failed")).toBe("0");
    await shot("bulk-operation");
    expect(await Promise.all(ids.map(statusOf))).toEqual(["cancelled", "cancelled"]);
    expect(await statusOf(spared)).toBe("waiting_for_message");
    await fetch(url(open, `/instances/${encodeURIComponent(spared)}/cancel`), { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  });

  it("renders a hostile payload as text, running nothing", async () => {
    await startFromForm(open, { orderId: HOSTILE, amount: "1" });
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).toContain("completed");
    expect(await page.textContent("#output")).toContain(HOSTILE.replace(/"/g, '\\"'));
    expect(await page.locator("img").count()).toBe(0);
    expect(await page.title()).not.toBe("pwned");
    await page.goto(url(open, `/ui?q=${encodeURIComponent(HOSTILE)}`));
    expect(await page.inputValue("input[name=q]")).toBe(HOSTILE);
    expect(await page.title()).not.toBe("pwned");
  });

  it("publishes to a channel and lists it with its pending message", async () => {
    await page.goto(url(open, "/ui/channels"));
    await page.fill("#publish-form input[name=channel]", "browser.news");
    await page.fill("#publish-form textarea[name=data]", '{"headline":"hello"}');
    await Promise.all([page.waitForURL(/\/ui\/channels\/browser\.news\?notice=published/), page.click("#publish-form button")]);
    expect(await page.textContent("main")).toContain('{"headline":"hello"}');
    await page.goto(url(open, "/ui/channels"));
    const row = page.locator("tr", { has: page.locator('a[href="/ui/channels/browser.news"]') });
    expect(await row.locator("td").allTextContents()).toEqual(["browser.news", "—", "0", "0", "1", "1", expect.stringMatching(/ago$/)]);
    await shot("channels");
    await page.goto(url(open, "/ui"));
    await shot("instances");
  });

  it("shows queued instances with their badge and filter, and the concurrency key they wait for", async () => {
    for (const seconds of ["30", "0"]) {
      await page.goto(url(open, "/ui/workflows/account_sync/start"));
      await page.fill("#f-account", "browser-acct");
      await page.fill("#f-seconds", seconds);
      await Promise.all([page.waitForURL(/notice=started/), page.click("#start-form button[type=submit]")]);
    }
    await expect.poll(() => page.textContent("#status"), { timeout: 10_000 }).toContain("queued");
    expect(await page.textContent("#queued")).toBe("waits for a slot of concurrency key browser-acct");
    const queuedId = decodeURIComponent(new URL(page.url()).pathname.split("/").pop()!);
    await page.goto(url(open, "/ui"));
    await Promise.all([page.waitForURL(/status=queued/), page.click('nav.counts a[data-status="queued"]')]);
    expect(await page.locator("table.instances tbody tr").count()).toBe(1);
    expect(await page.textContent("table.instances .badge")).toBe("queued");
    expect(await page.locator(`a[href="/ui/instances/${encodeURIComponent(queuedId)}"]`).count()).toBe(1);
    await shot("queued");
  });

  it("lists the schedules with their next run", async () => {
    await page.goto(url(open, "/ui"));
    await Promise.all([page.waitForURL(/\/ui\/schedules$/), page.click("header nav >> text=Schedules")]);
    const row = page.locator("#schedules tbody tr", { hasText: "daily_report" });
    expect(await row.locator("td").nth(1).textContent()).toBe("0 9 * * *");
    expect(await row.locator("td.next-run").textContent()).toMatch(/^\d{4}-\d\d-\d\d 0[78]:00:00\.000 \(in /);
    expect(await row.locator("td.last-run").textContent()).toBe("not yet");
    await shot("schedules");
  });

  it("pauses a schedule, shows it paused, triggers it now and resumes it", async () => {
    const schedule = async () => (await (await fetch(url(open, "/schedules"))).json()) as { schedules: { workflow: string; pausedAt: string | null }[] };
    const pausedAt = async () => (await schedule()).schedules.find((s) => s.workflow === "daily_report")!.pausedAt;
    await page.goto(url(open, "/ui/schedules"));
    const row = () => page.locator("#schedules tbody tr", { hasText: "daily_report" });
    await Promise.all([page.waitForURL(/notice=paused$/), row().locator("form[data-action=pause] button").click()]);
    expect(await row().locator("td.next-run .badge").textContent()).toBe("paused");
    expect(await pausedAt()).not.toBeNull();
    await shot("schedules-paused");
    await Promise.all([page.waitForURL(/notice=triggered$/), row().locator("form[data-action=trigger] button").click()]);
    const id = decodeURIComponent(new URL(page.url()).pathname.split("/").pop()!);
    expect(id).toMatch(/^schedule:daily_report:manual:/);
    expect(((await (await fetch(url(open, `/instances/${encodeURIComponent(id)}`))).json()) as { workflowName: string }).workflowName).toBe("daily_report");
    await page.goto(url(open, "/ui/schedules"));
    await Promise.all([page.waitForURL(/notice=schedule-resumed$/), row().locator("form[data-action=resume] button").click()]);
    expect(await row().locator("td.next-run").textContent()).toMatch(/^\d{4}-\d\d-\d\d 0[78]:00:00\.000 \(in /);
    expect(await pausedAt()).toBeNull();
  });

  it("shows an event the broker refused among the dead letters; Redeliver sends it once, Discard removes one", async () => {
    broker.refusing = true;
    const ids: string[] = [];
    for (const type of ["ok.browser.redeliver", "ok.browser.discard"]) {
      await page.goto(url(open, "/ui/workflows/announce/start"));
      await page.fill("#f-type", type);
      await Promise.all([page.waitForURL(/notice=started/), page.click("#start-form button[type=submit]")]);
      await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).toContain("completed");
      ids.push(JSON.parse((await page.textContent("#output"))!).eventId as string);
    }
    await page.goto(url(open, "/ui/outbox"));
    for (const id of ids) await expect.poll(async () => (await page.goto(url(open, "/ui/outbox")), page.locator("#dead-letters tr", { hasText: id }).count()), { timeout: 15_000 }).toBe(1);
    const first = page.locator("#dead-letters tr", { hasText: ids[0]! });
    expect(await first.textContent()).toContain("broker answered HTTP 422");
    expect(await first.locator(".badge").textContent()).toBe("invalid");
    await shot("outbox");

    broker.refusing = false;
    await Promise.all([page.waitForURL(/notice=redelivered/), first.locator("form[data-action=redeliver] button").click()]);
    expect(await page.textContent(".notice")).toContain("re-armed");
    await expect.poll(() => broker.deliveries(ids[0]!).filter((d) => d.status === 200).length, { timeout: 10_000 }).toBe(1);
    await page.goto(url(open, "/ui/outbox"));
    expect(await page.locator("#dead-letters tr", { hasText: ids[0]! }).count()).toBe(0);

    await Promise.all([page.waitForURL(/notice=discarded/), page.locator("#dead-letters tr", { hasText: ids[1]! }).locator("form[data-action=discard] button").click()]);
    expect(await page.locator("#dead-letters tr", { hasText: ids[1]! }).count()).toBe(0);
    expect(broker.deliveries(ids[0]!).filter((d) => d.status === 200)).toHaveLength(1);
    expect(broker.deliveries(ids[1]!).filter((d) => d.status === 200)).toHaveLength(0);
  });

  it("asks for the token once, refuses none or a wrong one, and keeps it out of URLs", async () => {
    await page.goto(url(guarded, "/ui"));
    expect(new URL(page.url()).pathname).toBe("/ui/login");
    await shot("login");
    // without logging in nothing is shown, and actions are refused
    const anon = await page.request.post(url(guarded, "/ui/channels/publish"), { form: { channel: "x", data: "1" }, headers: { origin: url(guarded, "") }, maxRedirects: 0 });
    expect(anon.status()).toBe(401);
    await page.fill("input[name=token]", "wrong-token");
    await page.click("#login-form button");
    expect(await page.textContent("main")).toContain("That token is not valid.");
    // the refused login is a 401, which Chromium logs: expected here
    problems = problems.filter((p) => !p.includes("status of 401"));
    await page.goto(url(guarded, "/ui/channels"));
    expect(new URL(page.url()).pathname).toBe("/ui/login");

    await page.fill("input[name=token]", TOKEN);
    await Promise.all([page.waitForURL(url(guarded, "/ui")), page.click("#login-form button")]);
    expect(await page.textContent("h1")).toBe("Instances");
    const [cookie] = await context.cookies(url(guarded, "/ui"));
    expect(cookie).toMatchObject({ name: "edda_ui", httpOnly: true, secure: true, sameSite: "Strict", path: "/ui" });
    expect(cookie!.value).not.toContain(TOKEN);
    expect(page.url()).not.toContain(TOKEN);
    await page.goto(url(guarded, "/ui/channels"));
    expect(await page.textContent("h1")).toBe("Channels");

    await page.click("header form button"); // log out
    await page.goto(url(guarded, "/ui"));
    expect(new URL(page.url()).pathname).toBe("/ui/login");
  });
});
