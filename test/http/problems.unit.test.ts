// RFC 9457 problem details for the refusals the app decides before storage:
// an unknown route, malformed and oversized bodies, a wrong content type,
// invalid input, a bad query, a missing signature, a foreign Host and Origin
// — each `application/problem+json` with type, title, status, detail and
// instance, keeping the members clients read before (error, error_type,
// issues) — and a 401 names its challenge and the variable that holds the
// token. The typed client reads the same members into EddaApiError. No
// database: none is asked for. Moved from problems.test.ts, which keeps the
// refusals storage decides (an unknown instance, a conflict) and the flows
// after them on real Postgres.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import * as z from "zod";
import { createClient, EddaApiError, EddaClientError } from "../../src/client/index.ts";
import { activity, workflow } from "../../src/index.ts";
import { appWithoutDatabase, type AppWithoutDatabase } from "../support/no-database.ts";

const TOKEN = "problem-token";
const step = activity("pd_step", async (_ctx, v: { amount: number }) => v.amount * 2);
const order = workflow("pd_order", { input: z.object({ amount: z.number().positive(), orderId: z.string() }) }, async (ctx, input) => step(ctx, input));
const other = workflow("pd_other", async () => "other");

const guarded = appWithoutDatabase({ workflows: [order, other], apiToken: TOKEN, maxBodyBytes: 4096 });
const open = appWithoutDatabase({ workflows: [order, other] });
afterEach(() => expect([...guarded.touched, ...open.touched]).toEqual([]));
afterAll(async () => {
  await guarded.edda.close();
  await open.edda.close();
});

const auth = { authorization: `Bearer ${TOKEN}` };
const json = { "content-type": "application/json" };
const call = (app: AppWithoutDatabase, path: string, init: RequestInit = {}, host = "localhost") => Promise.resolve(app.edda.app.request(new Request(`http://${host}${path}`, init)));

async function expectProblem(res: Response, status: number, errorType: string, path: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  const body = (await res.json()) as Record<string, unknown>;
  expect(body).toMatchObject({ type: "about:blank", title: expect.any(String), status, detail: expect.any(String), instance: path, error_type: errorType });
  expect(body.error).toBe(body.detail); // the old member, kept
  return body;
}

describe("problem details", () => {
  it("every kind of refusal decided before storage is an RFC 9457 problem with the old fields kept", async () => {
    const start = (body: unknown, headers: Record<string, string> = { ...auth, ...json }) =>
      call(guarded, "/workflows/pd_order/instances", { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
    const cases: [Promise<Response>, number, string, string][] = [
      [call(guarded, "/nope", { headers: auth }), 404, "NotFound", "/nope"],
      [start("{not json"), 400, "BadRequest", "/workflows/pd_order/instances"],
      [start({ input: "x".repeat(5000) }), 413, "PayloadTooLarge", "/workflows/pd_order/instances"],
      [start({ input: {} }, { ...auth, "content-type": "text/plain" }), 415, "UnsupportedMediaType", "/workflows/pd_order/instances"],
      [start({ input: { amount: -3, orderId: "o" } }), 422, "ValidationError", "/workflows/pd_order/instances"],
      [call(guarded, "/instances?status=bogus", { headers: auth }), 400, "BadRequest", "/instances"],
      [call(guarded, "/_edda/sweep", { method: "POST" }), 401, "Unauthorized", "/_edda/sweep"],
      [call(open, "/instances", {}, "evil.example:8787"), 421, "MisdirectedRequest", "/instances"],
      [call(open, "/workflows/pd_other/instances", { method: "POST", headers: { ...json, origin: "http://evil.example" }, body: "{}" }), 403, "Forbidden", "/workflows/pd_other/instances"],
    ];
    for (const [res, status, type, path] of cases) await expectProblem(await res, status, type, path);

    // 422 keeps zod's issues, with their paths.
    const invalid = await expectProblem(await start({ input: { amount: -3, orderId: "o" } }), 422, "ValidationError", "/workflows/pd_order/instances");
    expect(invalid.issues).toEqual([expect.objectContaining({ path: ["amount"] })]);
  });

  it("a 401 names its challenge and the variable that holds the token", async () => {
    const none = await call(guarded, "/instances");
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="edda"');
    expect((await expectProblem(none, 401, "Unauthorized", "/instances")).detail).toContain("EDDA_API_TOKEN");
    const wrong = await call(guarded, "/instances", { headers: { authorization: "Bearer nope" } });
    expect(wrong.headers.get("www-authenticate")).toBe('Bearer realm="edda", error="invalid_token"');
    await expectProblem(wrong, 401, "Unauthorized", "/instances");
    const unsigned = await call(guarded, "/_edda/step", { method: "POST", headers: json, body: "{}" });
    expect(unsigned.headers.get("www-authenticate")).toMatch(/^EddaSignature /);
  });

  it("the typed client exposes the problem's members", async () => {
    const fetch = (input: string, init: RequestInit) => Promise.resolve(guarded.edda.app.request(input, init));
    const c = createClient<[typeof order, typeof other]>({ baseUrl: "http://localhost", token: TOKEN, fetch });
    const err = await c.start("pd_order", { amount: -1, orderId: "x" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EddaApiError);
    expect(err).toBeInstanceOf(EddaClientError);
    const e = err as EddaApiError;
    expect({ status: e.status, type: e.type, title: e.title, instance: e.instance, errorType: e.errorType }).toEqual({
      status: 422,
      type: "about:blank",
      title: "Unprocessable Content",
      instance: "/workflows/pd_order/instances",
      errorType: "ValidationError",
    });
    expect(e.detail).toBe(e.message);
    expect(e.issues).toEqual([expect.objectContaining({ path: ["amount"] })]);
    const unauthorized = (await createClient({ baseUrl: "http://localhost", fetch }).list().catch((x: unknown) => x)) as EddaApiError;
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.detail).toContain("EDDA_API_TOKEN");
  });
});
