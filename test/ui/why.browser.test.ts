// Issue 37 in a real browser: the viewer's "why" banner on the instance page (the reason, what
// it waits behind as links, what moves it) and the why column on the list, in Chromium against
// the Node server on a fresh Postgres database. A queued account_sync names the sync holding its
// account's slot; the banner's link leads to it, whose own banner says it is sleeping.
// Screenshots go to test-artifacts/ui/ (git-ignored); any console error fails the test.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { workflows } from "../../functions/workflows/index.ts";
import { freshPostgres } from "../support/engine.ts";
import { chromiumLaunch } from "../support/chromium.ts";

const ARTIFACTS = join(import.meta.dirname, "../../test-artifacts/ui");

let server: NodeServer;
let context: BrowserContext;
let profile: string;
let page: Page;
const problems: string[] = [];

const url = (path: string) => `http://127.0.0.1:${server.port}${path}`;
const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true, caret: "initial" });
async function start(workflow: string, input: unknown): Promise<string> {
  const res = await fetch(url(`/workflows/${workflow}/instances`), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input }) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { instanceId: string }).instanceId;
}
async function statusOf(id: string): Promise<string> {
  return ((await (await fetch(url(`/instances/${encodeURIComponent(id)}`))).json()) as { status: string }).status;
}

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const db = await freshPostgres("why_browser");
  server = await serveNode({ workflows, env: { DATABASE_URL: db.url, EDDA_SWEEP_INTERVAL_MS: "500" }, port: 0 });
  profile = mkdtempSync(join(tmpdir(), "edda-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    ...(await chromiumLaunch()),
    headless: true,
    chromiumSandbox: false,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 860 },
  });
  page = await context.newPage();
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(e.message));
}, 60_000);

afterAll(async () => {
  await context?.close();
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

describe("the viewer says why an instance is not moving", () => {
  it("a queued account_sync's banner names the sync holding its slot, links to it, and that one's banner says it sleeps; the list has a why column", { timeout: 60_000 }, async () => {
    const holder = await start("account_sync", { account: "acme", seconds: 3600 });
    const queued = await start("account_sync", { account: "acme", seconds: 1 });
    await expect.poll(() => statusOf(holder), { timeout: 15_000 }).toBe("waiting_for_timer");
    expect(await statusOf(queued)).toBe("queued");

    await page.goto(url(`/ui/instances/${encodeURIComponent(queued)}`));
    expect(await page.getAttribute("#why", "data-why-kind")).toBe("concurrency");
    expect(await page.textContent("#why-detail")).toContain(`queued on concurrency key "acme" (limit 1): held by ${holder}`);
    expect(await page.textContent("#why-next")).toContain(`a slot frees when ${holder} ends`);
    // the banner is styled by the viewer's own stylesheet (its CSP admits it)
    expect(await page.evaluate(() => getComputedStyle(document.querySelector("#why")!).borderLeftStyle)).toBe("solid");
    await shot("why-queued");

    await Promise.all([page.waitForURL(new RegExp(`/ui/instances/${holder}$`)), page.click(`#why-blocked-by a[href="/ui/instances/${holder}"]`)]);
    expect(await page.getAttribute("#why", "data-why-kind")).toBe("timer");
    expect(await page.textContent("#why-detail")).toMatch(/sleeping at sleep:1 until .* \(in 60 min\)/);
    expect(await page.textContent("#why")).toContain("moves by itself at");
    await shot("why-sleeping");

    await page.goto(url("/ui?workflow=account_sync"));
    expect(await page.textContent("table.instances thead")).toContain("why");
    expect(await page.getAttribute(`table.instances tr:has(a[href="/ui/instances/${queued}"]) [data-why]`, "data-why")).toBe("concurrency");
    expect(await page.getAttribute(`table.instances tr:has(a[href="/ui/instances/${holder}"]) [data-why]`, "data-why")).toBe("timer");
    await shot("why-list");
    expect(problems).toEqual([]);
  });
});
