// Optional surfaces of the app: the viewer is on where a developer runs it
// (serveNode, the Deno adapter) and only with `viewer: viewer()` in an app of
// one's own (createEdda) or a Worker, so a bundle without it carries none of
// its pages (test/runtime/worker-bundle.test.ts). createEdda no longer
// migrates: the old option says what to write instead. No database: nothing
// here sends a statement (the viewer's login page and a 404 need none).
import { afterEach, describe, expect, test } from "vitest";
import { createEdda, type EddaOptions } from "../../src/edda.ts";
import { mcp } from "../../src/mcp.ts";
import { createDenoApp } from "../../src/platform/deno.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { viewer } from "../../src/viewer.ts";

/** Nothing listens here; postgres.js connects on the first statement only. */
const NOWHERE = "postgres://edda:edda@127.0.0.1:9/none";
const TOKEN = "surface-token";
const env = { DATABASE_URL: NOWHERE, EDDA_SECRET: "s3cret", EDDA_API_TOKEN: TOKEN };

/** GET /ui: 303 to the login page when the viewer is mounted (a token is set), a 404 saying how to turn it on when not. */
async function uiStatus(fetch: (r: Request) => Promise<Response>): Promise<{ ui: number; login: number; instances: number }> {
  const ui = await fetch(new Request("http://localhost/ui"));
  if (ui.status === 303) expect(ui.headers.get("location")).toBe("/ui/login");
  else expect(((await ui.json()) as { error: string }).error).toContain('pass viewer: viewer() from "edda-edge/viewer"');
  const login = await fetch(new Request("http://localhost/ui/login"));
  // The API behind its token is unaffected either way.
  const instances = await fetch(new Request("http://localhost/instances"));
  return { ui: ui.status, login: login.status, instances: instances.status };
}

describe("the viewer surface", () => {
  let node: NodeServer | undefined;
  afterEach(async () => {
    await node?.close();
    node = undefined;
  });

  const app = (opts: Partial<EddaOptions> = {}) => createEdda({ workflows: [], database: createPostgresJsDatabase({ url: NOWHERE }), apiToken: TOKEN, secret: "s3cret", ...opts });

  test("createEdda serves /ui only with viewer: viewer()", async () => {
    const without = app();
    const withViewer = app({ viewer: viewer() });
    expect(await uiStatus((r) => without.fetch(r))).toEqual({ ui: 404, login: 404, instances: 401 });
    expect(await uiStatus((r) => withViewer.fetch(r))).toEqual({ ui: 303, login: 200, instances: 401 });
    const page = await withViewer.fetch(new Request("http://localhost/ui/login"));
    expect(await page.text()).toContain('action="/ui/login"');
  });

  test("serveNode serves it by default and not with viewer: false", async () => {
    node = await serveNode({ workflows: [], env, port: 0, sweepIntervalMs: 0 });
    expect(await uiStatus((r) => node!.edda.fetch(r))).toEqual({ ui: 303, login: 200, instances: 401 });
    await node.close();
    node = await serveNode({ workflows: [], env, port: 0, sweepIntervalMs: 0, viewer: false });
    expect(await uiStatus((r) => node!.edda.fetch(r))).toEqual({ ui: 404, login: 404, instances: 401 });
  });

  test("the Deno adapter serves it by default and not with viewer: false", async () => {
    for (const [opts, ui] of [[{}, 303], [{ viewer: false as const }, 404]] as const) {
      const deno = createDenoApp({ workflows: [], env, ...opts });
      try {
        expect((await uiStatus((r) => deno.edda.fetch(r))).ui).toBe(ui);
      } finally {
        await deno.edda.close();
        await deno.database.close();
      }
    }
  });

  test("a surface given for the other option is refused when the app is built", () => {
    expect(() => app({ viewer: mcp() })).toThrow(/viewer: mcp\(\) is not the viewer surface/);
    expect(() => app({ mcp: viewer() })).toThrow(/mcp: viewer\(\) is not the mcp surface/);
    expect(() => app({ viewer: true as never })).toThrow(/pass viewer\(\) from "edda-edge\/viewer"/);
  });

  test("createEdda's old autoMigrate option fails loudly, naming the call that replaces it", () => {
    expect(() => app({ autoMigrate: true } as never)).toThrow(/await migrate\(database\.db\)/);
  });
});
