// The viewer is part of the app on every platform: the Deno entry (real Deno)
// and the Worker entry (real workerd, a database client per request) serve
// the login, the list and an instance page from the same Hono app.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { startDeno, startWrangler, type Server } from "../runtime/processes.ts";

const TOKEN = "runtime-viewer-token-123";

function viewerFlow(name: string, start: (url: string) => Promise<Server>) {
  describe(`viewer on ${name}`, { timeout: 60_000 }, () => {
    let server: Server;
    beforeAll(async () => {
      const url = await freshDatabase(`viewer_${name}`);
      const db = createPostgresJsDatabase({ url, max: 1 });
      await migrate(db.db);
      await db.close();
      server = await start(url);
    }, 120_000);
    afterAll(async () => {
      await server?.stop();
    });

    it("logs in with the token and shows the list and a completed instance", async () => {
      const anon = await fetch(`${server.url}/ui`, { redirect: "manual" });
      expect(anon.status).toBe(303);
      expect(anon.headers.get("location")).toBe("/ui/login");

      const login = await fetch(`${server.url}/ui/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: server.url },
        body: new URLSearchParams({ token: TOKEN }).toString(),
      });
      expect(login.status).toBe(303);
      const cookie = login.headers.get("set-cookie")!.split(";")[0]!;

      const started = await fetch(`${server.url}/workflows/order_saga/instances`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ input: { orderId: `${name}-1`, amount: 3 }, instanceId: `viewer-${name}-1` }),
      });
      expect(started.status).toBe(201);
      // follow-up steps run in the runtime; the page shows the outcome once they are done
      let html = "";
      for (let i = 0; i < 100 && !html.includes("badge s-completed"); i++) {
        if (i) await new Promise((r) => setTimeout(r, 300));
        html = await (await fetch(`${server.url}/ui/instances/viewer-${name}-1`, { headers: { cookie } })).text();
      }
      expect(html).toContain('<span class="badge s-completed">completed</span>');
      expect(html).toContain("ship_order");

      const list = await fetch(`${server.url}/ui`, { headers: { cookie } });
      expect(list.status).toBe(200);
      expect(await list.text()).toContain(`viewer-${name}-1`);
      const page = await fetch(`${server.url}/ui/instances/viewer-${name}-1`, { headers: { cookie } });
      expect(page.status).toBe(200);
      expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
    });
  });
}

viewerFlow("deno", (url) => startDeno({ DATABASE_URL: url, EDDA_SECRET: "deno-viewer-secret", EDDA_API_TOKEN: TOKEN, EDDA_SWEEP_INTERVAL_MS: "500" }));
viewerFlow("workerd", (url) => startWrangler({ DATABASE_URL: url, EDDA_SECRET: "workerd-viewer-secret", EDDA_API_TOKEN: TOKEN }));
