// Open mode (no token: the `npm start` default) against a hostile page in real
// Chromium, on the Node server and real Postgres. A page served from another
// origin (http://localhost:OTHER) tries what a browser lets any site do
// without a CORS preflight — text/plain and type-less JSON posts, a body-less
// cancel, form posts to the API and to viewer actions (cancel, a bulk cancel)
// — and none of it starts or cancels anything (no bulk operation either). A DNS-rebinding name (evil.example resolved to
// 127.0.0.1 by Chromium's resolver rules) gets 421 for the API and the viewer.
// Afterwards the viewer, used from its own origin, still cancels the instance.
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitMessage, workflow } from "../../src/index.ts";
import { engineOf } from "../../src/edda.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { freshPostgres } from "../support/engine.ts";
import { chromiumLaunch } from "../support/chromium.ts";

const waits = workflow("xo_wait", async (ctx, _input: unknown) => (await waitMessage(ctx, "xo-go", { timeoutSeconds: 600 })).data);

let server: NodeServer;
let attacker: Server;
let attackerPort = 0;
let context: BrowserContext;
let profile: string;

/** The hostile page: every simple request it can make against `target`, then `document.title = "done"`. */
const attackPage = (target: string) => `<!doctype html><html><body>
<iframe name="sink" style="display:none"></iframe>
<form id="api" method="post" enctype="text/plain" target="sink" action="${target}/workflows/xo_wait/instances"><input name='{"input":1,"instanceId":"evil-form","x":"' value='"}'></form>
<form id="ui" method="post" target="sink" action="${target}/ui/instances/xo-victim/cancel"></form>
<form id="bulk" method="post" target="sink" action="${target}/ui/bulk"><input name="action" value="cancel"><input name="workflow" value="xo_wait"><input name="requestId" value="evil-bulk"></form>
<script>
(async () => {
  const opts = { method: "POST", mode: "no-cors" };
  const tries = [
    fetch("${target}/workflows/xo_wait/instances", { ...opts, headers: { "content-type": "text/plain" }, body: JSON.stringify({ input: 1, instanceId: "evil-text" }) }),
    fetch("${target}/workflows/xo_wait/instances", { ...opts, body: new Blob([JSON.stringify({ input: 1, instanceId: "evil-blob" })]) }),
    fetch("${target}/instances/xo-victim/cancel", opts),
    fetch("${target}/instances/xo-victim/messages", { ...opts, headers: { "content-type": "text/plain" }, body: JSON.stringify({ channel: "xo-go", data: "evil" }) }),
  ];
  for (const t of tries) await t.catch(() => null);
  document.getElementById("api").submit();
  await new Promise((r) => setTimeout(r, 500));
  document.getElementById("ui").submit();
  await new Promise((r) => setTimeout(r, 500));
  document.getElementById("bulk").submit();
  await new Promise((r) => setTimeout(r, 500));
  document.title = "done";
})();
</script></body></html>`;

beforeAll(async () => {
  const db = await freshPostgres("cross_origin");
  server = await serveNode({ workflows: [waits], env: { DATABASE_URL: db.url, EDDA_SWEEP_INTERVAL_MS: "60000" }, port: 0 });
  await server.edda.start(waits, null, { instanceId: "xo-victim" });
  const target = `http://127.0.0.1:${server.port}`;
  attacker = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end(attackPage(target)));
  await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
  attackerPort = (attacker.address() as { port: number }).port;
  profile = mkdtempSync(join(tmpdir(), "edda-chromium-xo-"));
  context = await chromium.launchPersistentContext(profile, {
    ...(await chromiumLaunch()),
    headless: true,
    chromiumSandbox: false,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP evil.example 127.0.0.1"],
  });
  for (;;) {
    if ((await server.edda.getInstance("xo-victim"))?.status === "waiting_for_message") break;
    await new Promise((r) => setTimeout(r, 50));
  }
}, 90_000);

afterAll(async () => {
  await context?.close();
  await new Promise((r) => attacker?.close(r));
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

describe("open mode from a cross-origin page in Chromium", { timeout: 60_000 }, () => {
  it("a page on another origin starts nothing, cancels nothing, sends nothing", async () => {
    const page = await context.newPage();
    await page.goto(`http://localhost:${attackerPort}/`);
    await page.waitForFunction(() => document.title === "done", undefined, { timeout: 30_000 });
    await page.close();
    await server.edda.sweep();
    const { instances } = await server.edda.findInstances({ limit: 100 });
    expect(instances.map((i) => i.instanceId)).toEqual(["xo-victim"]);
    expect((await server.edda.getInstance("xo-victim"))?.status).toBe("waiting_for_message");
    expect(await (await engineOf(server.edda)).listBulkOperations(10)).toEqual([]);
  });

  it("a DNS-rebinding name gets 421 for the API and the viewer", async () => {
    const page = await context.newPage();
    for (const path of ["/instances", "/instances/xo-victim", "/ui", "/ui/instances/xo-victim"]) {
      const res = await page.goto(`http://evil.example:${server.port}${path}`);
      expect(res?.status(), path).toBe(421);
      expect(await page.content(), path).not.toContain("xo_wait");
    }
    await page.close();
  });

  it("the viewer from its own origin still cancels the instance", async () => {
    const page = await context.newPage();
    await page.goto(`http://127.0.0.1:${server.port}/ui/instances/xo-victim`);
    await page.click("#cancel-form button");
    await page.waitForURL(/notice=cancelled/);
    await page.close();
    for (let i = 0; i < 100 && (await server.edda.getInstance("xo-victim"))?.status !== "cancelled"; i++) await new Promise((r) => setTimeout(r, 50));
    expect((await server.edda.getInstance("xo-victim"))?.status).toBe("cancelled");
  });
});
