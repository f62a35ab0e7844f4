// The tag filter on every surface, against one Node server on real Postgres:
// the typed client (`list({ tags })`), the CLI (`instances list --tag`, a
// malformed one a usage error), the MCP tool `list_instances` through the
// official MCP client, and the viewer's filter bar (`/ui?tag=`; a malformed
// tag is dropped, the page still answers).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { createClient } from "../../src/client/index.ts";
import { mcp } from "../../src/mcp.ts";
import { remoteCommand } from "../../src/platform/cli/remote.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { freshPostgres } from "../support/engine.ts";

const TOKEN = "tag-surfaces-token";
let node: NodeServer;
let url: string;
const ids: Record<string, string> = {};

beforeAll(async () => {
  const pg = await freshPostgres("tag_surfaces");
  node = await serveNode({ workflows: [orderSaga], mcp: mcp(), port: 0, sweepIntervalMs: 0, env: { DATABASE_URL: pg.url, EDDA_API_TOKEN: TOKEN, EDDA_SECRET: "s" } });
  url = `http://127.0.0.1:${node.port}`;
  for (const orderId of ["o-1", "o-2", "o-3"]) ids[orderId] = (await node.edda.start("order_saga", { orderId, amount: 5 })).instanceId;
}, 120_000);
afterAll(async () => {
  await node?.close();
});

it("the typed client lists by tags", async () => {
  const c = createClient({ baseUrl: url, token: TOKEN });
  expect((await c.list({ tags: { orderId: "o-2" } })).instances.map((i) => i.instanceId)).toEqual([ids["o-2"]]);
  expect((await c.list({ tags: { orderId: "o-2", other: "x" } })).instances).toEqual([]);
});

it("the CLI lists by --tag, and refuses one that is not key:value", async () => {
  const out: string[] = [];
  const err: string[] = [];
  const io = { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) };
  const env = { EDDA_URL: url, EDDA_API_TOKEN: TOKEN };
  expect(await remoteCommand("instances", ["list", "--tag", "orderId:o-3", "--json"], env, io as never)).toBe(0);
  expect((JSON.parse(out.join("\n")) as { instances: { instanceId: string }[] }).instances.map((i) => i.instanceId)).toEqual([ids["o-3"]]);
  await expect(remoteCommand("instances", ["list", "--tag", "orderId"], env, io as never)).rejects.toThrow(/not key:value/);
});

it("the MCP tool list_instances filters by tags", async () => {
  const c = new Client({ name: "tag-test", version: "1.0.0" });
  await c.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
  const r = (await c.callTool({ name: "list_instances", arguments: { tags: { orderId: "o-1" } } })) as CallToolResult;
  expect((r.structuredContent as { instances: { instance_id: string }[] }).instances.map((i) => i.instance_id)).toEqual([ids["o-1"]]);
  const bad = (await c.callTool({ name: "list_instances", arguments: { tags: { "bad key": "v" } } })) as CallToolResult;
  expect(bad.isError).toBe(true);
  await c.close();
});

it("the viewer's filter bar filters by tag; a malformed one is dropped", async () => {
  const page = (q: string) => fetch(`${url}/ui${q}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const html = await (await page("?tag=orderId%3Ao-1")).text();
  expect(html).toContain('name="tag"');
  expect(html).toContain(ids["o-1"]);
  expect(html).not.toContain(ids["o-2"]);
  const all = await page("?tag=no-colon");
  expect(all.status).toBe(200);
  expect(await all.text()).toContain(ids["o-2"]);
});
