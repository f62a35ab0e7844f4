// The OpenAPI document needs the API token when one is configured, and a
// refused request changes nothing in the database (the document itself is
// tested without a database in openapi.unit.test.ts).
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { workflows } from "../../functions/workflows/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { mcp } from "../../src/mcp.ts";

const TOKEN = "openapi-token";
let t: TestApp;

const auth = { authorization: `Bearer ${TOKEN}` };

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("pglite", "openapi"), { workflows, apiToken: TOKEN, mcp: mcp() });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

it("needs the API token when one is configured, and refusing changes nothing", async () => {
  const [before] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_instances`);
  expect((await t.edda.app.request("/openapi.json")).status).toBe(401);
  const r = await t.edda.app.request("/instances?limit=0", { headers: auth });
  expect(r.status).toBe(400);
  const [after] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_instances`);
  expect(after!.n).toBe(before!.n);
  // Valid traffic still flows.
  const ok = await t.edda.app.request("/workflows/pipeline/instances", { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ input: { steps: 1 } }) });
  expect(ok.status).toBe(201);
});
