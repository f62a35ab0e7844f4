// The OpenAPI document needs the API token when one is configured (it names
// every workflow and its input schema), and a refused request changes
// nothing — here, with no database behind the app, it asks none for
// anything. The document itself: openapi.unit.test.ts. (This file ran on
// PGlite, where it also started an instance afterwards; the starts over HTTP
// are api.test.ts's.)
import { afterAll, expect, it } from "vitest";
import { workflows } from "../../functions/workflows/index.ts";
import { mcp } from "../../src/mcp.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const TOKEN = "openapi-token";
const auth = { authorization: `Bearer ${TOKEN}` };
const t = appWithoutDatabase({ workflows, apiToken: TOKEN, mcp: mcp() });
afterAll(() => t.edda.close());

it("needs the API token when one is configured, and refusing changes nothing", async () => {
  const refused = await t.request("/openapi.json");
  expect(refused.status).toBe(401);
  expect(await refused.text()).not.toContain("pipeline");
  expect((await t.request("/openapi.json", { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
  expect((await t.request("/instances?limit=0", { headers: auth })).status).toBe(400);
  expect(t.touched).toEqual([]);
  // With the token, the document.
  const ok = await t.request("/openapi.json", { headers: auth });
  expect(ok.status).toBe(200);
  expect(Object.keys(((await ok.json()) as { paths: object }).paths)).toContain("/workflows/pipeline/instances");
  expect(t.touched).toEqual([]);
});
