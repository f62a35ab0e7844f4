// RFC 9457 problem details on real Postgres, for the refusals storage
// decides (an unknown instance, a conflict); a start posted without its
// {"input": …} wrapper says so, and wrapped it starts. "No answer" for the
// typed client: test/client/connection-errors.unit.test.ts. The refusals the app decides before storage (routes, bodies, content
// types, validation, Host and Origin, 401 challenges) and the client's
// EddaApiError members: problems.unit.test.ts, without a database.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { activity, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "problem-token";
const step = activity("pd_step", async (_ctx, v: { amount: number }) => v.amount * 2);
const order = workflow("pd_order", { input: z.object({ amount: z.number().positive(), orderId: z.string() }) }, async (ctx, input) => step(ctx, input));
const other = workflow("pd_other", async () => "other");

let guarded: TestApp;

beforeAll(async () => {
  const database = await openTestDatabase("postgres-js", "problems");
  guarded = makeTestApp(database, { workflows: [order, other], apiToken: TOKEN, maxBodyBytes: 4096 });
}, 120_000);
afterAll(async () => {
  await guarded.edda.close();
  await guarded.database.close();
});

const auth = { authorization: `Bearer ${TOKEN}` };
const json = { "content-type": "application/json" };
const call = async (app: TestApp, path: string, init: RequestInit = {}, host = "localhost"): Promise<Response> => app.edda.app.request(new Request(`http://${host}${path}`, init));

async function expectProblem(res: Response, status: number, errorType: string, path: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  const body = (await res.json()) as Record<string, unknown>;
  expect(body).toMatchObject({ type: "about:blank", title: expect.any(String), status, detail: expect.any(String), instance: path, error_type: errorType });
  expect(body.error).toBe(body.detail); // the old member, kept
  return body;
}

describe("problem details", () => {
  it("the refusals storage decides are RFC 9457 problems too: an unknown instance (404), an id of another workflow (409)", async () => {
    await expectProblem(await call(guarded, "/instances/missing", { headers: auth }), 404, "NotFoundError", "/instances/missing");
    const start = (path: string, body: unknown) => call(guarded, path, { method: "POST", headers: { ...auth, ...json }, body: JSON.stringify(body) });
    await start("/workflows/pd_order/instances", { input: { amount: 1, orderId: "o" }, instanceId: "pd-conflict" });
    await expectProblem(await start("/workflows/pd_other/instances", { instanceId: "pd-conflict" }), 409, "ConflictError", "/workflows/pd_other/instances");
  });

  it("a start posted without its input wrapper says how to wrap it", async () => {
    const res = await call(guarded, "/workflows/pd_order/instances", { method: "POST", headers: { ...auth, ...json }, body: JSON.stringify({ amount: 5, orderId: "o1" }) });
    const body = await expectProblem(res, 422, "ValidationError", "/workflows/pd_order/instances");
    expect(body.detail).toContain('wrap the input as {"input": …}');
    expect(body.detail).toContain('"amount", "orderId"');
    // Wrapped, the same values start.
    const ok = await call(guarded, "/workflows/pd_order/instances", { method: "POST", headers: { ...auth, ...json }, body: JSON.stringify({ input: { amount: 5, orderId: "o1" }, instanceId: "pd-wrapped" }) });
    expect(ok.status).toBe(201);
    expect((await guarded.waitFor("pd-wrapped")).output).toBe(10);
  });
});
