// Signed internal calls on real Postgres: a captured /_edda/sweep request is
// accepted as sent, refused with a query string appended (the MAC covers it),
// refused once its timestamp is outside the ±60 s window, and a request signed
// with its query is accepted with exactly that query. Refusals run nothing;
// a valid workflow still completes afterwards.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sign } from "../../src/core/signature.ts";
import { activity, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const step = activity("sg_step", async (_ctx, v: number) => v * 2);
const dbl = workflow("sg_double", async (ctx, n: number) => step(ctx, n));
let t: TestApp;

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("postgres-js", "signatures"), { workflows: [dbl], secret: "sig-secret" });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

const post = (path: string, headers: Record<string, string>, body = "{}") => t.edda.app.request(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

describe("signed internal calls", () => {
  it("the MAC covers the query; the window is ±60 s", async () => {
    const captured = await sign("sig-secret", { method: "POST", path: "/_edda/sweep", body: "{}" });
    expect((await post("/_edda/sweep", captured)).status).toBe(200);
    expect((await post("/_edda/sweep?x=1", captured)).status).toBe(401);
    expect((await post("/_edda/sweep?", captured)).status).toBe(200); // an empty query is no query
    const now = Math.floor(Date.now() / 1000);
    expect((await post("/_edda/sweep", await sign("sig-secret", { method: "POST", path: "/_edda/sweep", body: "{}" }, now - 120))).status).toBe(401);
    expect((await post("/_edda/sweep", await sign("sig-secret", { method: "POST", path: "/_edda/sweep", body: "{}" }, now + 120))).status).toBe(401);
    const withQuery = await sign("sig-secret", { method: "POST", path: "/_edda/sweep", query: "?only=timers", body: "{}" });
    expect((await post("/_edda/sweep?only=timers", withQuery)).status).toBe(200);
    expect((await post("/_edda/sweep?only=outbox", withQuery)).status).toBe(401);
    expect((await post("/_edda/sweep", withQuery)).status).toBe(401);
    await t.edda.start(dbl, 21, { instanceId: "sg-1" });
    expect((await t.waitFor("sg-1")).output).toBe(42);
  });
});
