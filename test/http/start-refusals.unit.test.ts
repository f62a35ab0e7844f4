// Starting over HTTP, the refusals the app decides before storage: invalid
// input (422 with zod's issues), an unknown workflow (404), malformed JSON
// (400), an oversize body (413) and a missing bearer token (401). Each is
// answered without the database: the app runs over noDatabase(), so "nothing
// created" is "nothing asked of the database". (Moved from api.test.ts; the
// accepted starts stay there, on PGlite.)
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const TOKEN = "api-token-123";
const t = appWithoutDatabase({ workflows: [orderSaga, pipeline], apiToken: TOKEN });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const json = (body: unknown) => ({
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
  body: typeof body === "string" ? body : JSON.stringify(body),
});

describe("POST /workflows/:name/instances", () => {
  it("422 with zod issues for invalid input, nothing created", async () => {
    const r = await t.request("/workflows/order_saga/instances", json({ input: { orderId: "x", amount: "ten" } }));
    expect(r.status).toBe(422);
    expect(r.headers.get("content-type")).toContain("application/problem+json");
    const body = (await r.json()) as { error_type: string; issues: { path: string[] }[] };
    expect(body.error_type).toBe("ValidationError");
    expect(body.issues[0]!.path).toEqual(["amount"]);
  });

  it("404 for an unknown workflow", async () => {
    const r = await t.request("/workflows/nope/instances", json({ input: {} }));
    expect(r.status).toBe(404);
    expect(await r.json()).toMatchObject({ error_type: "NotFoundError" });
  });

  it("400 for malformed JSON, 413 for an oversize body, nothing created", async () => {
    const bad = await t.request("/workflows/pipeline/instances", json("{not json"));
    expect(bad.status).toBe(400);
    const big = await t.request("/workflows/pipeline/instances", json({ input: { steps: 1, pad: "x".repeat(1024 * 1024 + 10) } }));
    expect(big.status).toBe(413);
  });

  it("401 without the bearer token", async () => {
    const r = await t.request("/workflows/pipeline/instances", { method: "POST", body: "{}" });
    expect(r.status).toBe(401);
    expect(await r.json()).toMatchObject({ error_type: "Unauthorized" });
  });
});
