// RFC 9457 problem details on real Postgres: every kind of refusal the API
// gives (unknown route and instance, malformed and oversized bodies, wrong
// content type, foreign Host and Origin, missing token and signature,
// validation, conflicts) answers `application/problem+json` with type, title,
// status, detail and instance, and keeps the fields clients read before
// (error, error_type, issues) as extensions. A 401 carries WWW-Authenticate
// and names EDDA_API_TOKEN; a start posted without its {"input": …} wrapper
// says so. The typed client exposes the problem's members, and maps "no
// answer" to EddaConnectionError. Valid traffic flows after all of it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { createClient, EddaApiError, EddaClientError, EddaConnectionError } from "../../src/client/index.ts";
import { activity, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";
import { listen, serveTestApp, type Listening } from "../support/listen.ts";

const TOKEN = "problem-token";
const step = activity("pd_step", async (_ctx, v: { amount: number }) => v.amount * 2);
const order = workflow("pd_order", { input: z.object({ amount: z.number().positive(), orderId: z.string() }) }, async (ctx, input) => step(ctx, input));
const other = workflow("pd_other", async () => "other");

let guarded: TestApp;
let open: TestApp;
let server: Listening;

beforeAll(async () => {
  const database = await openTestDatabase("postgres-js", "problems");
  guarded = makeTestApp(database, { workflows: [order, other], apiToken: TOKEN, maxBodyBytes: 4096 });
  open = makeTestApp(database, { workflows: [order, other] });
  server = await serveTestApp(guarded);
}, 120_000);
afterAll(async () => {
  await open.edda.close();
  await server?.close();
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
  it("every kind of refusal is an RFC 9457 problem with the old fields kept", async () => {
    const start = (body: unknown, headers: Record<string, string> = { ...auth, ...json }) =>
      call(guarded, "/workflows/pd_order/instances", { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
    const cases: [Promise<Response>, number, string, string][] = [
      [call(guarded, "/nope", { headers: auth }), 404, "NotFound", "/nope"],
      [call(guarded, "/instances/missing", { headers: auth }), 404, "NotFoundError", "/instances/missing"],
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

    // 409: the same id under another workflow.
    await start({ input: { amount: 1, orderId: "o" }, instanceId: "pd-conflict" });
    const conflict = call(guarded, "/workflows/pd_other/instances", { method: "POST", headers: { ...auth, ...json }, body: JSON.stringify({ instanceId: "pd-conflict" }) });
    await expectProblem(await conflict, 409, "ConflictError", "/workflows/pd_other/instances");
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

  it("the typed client exposes the problem's members", async () => {
    const c = createClient<[typeof order, typeof other]>({ baseUrl: server.url, token: TOKEN });
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
    const unauthorized = (await createClient({ baseUrl: server.url }).list().catch((x: unknown) => x)) as EddaApiError;
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.detail).toContain("EDDA_API_TOKEN");
  });

  it("no answer is an EddaConnectionError, not a bare TypeError; valid traffic flows after", async () => {
    const gone = await listen(() => new Response("never"));
    await gone.close(); // a port that refuses connections
    const down = createClient({ baseUrl: gone.url, token: TOKEN });
    const err = await down.list().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EddaConnectionError);
    expect(err).toBeInstanceOf(EddaClientError);
    expect((err as EddaConnectionError).url).toBe(`${gone.url}/instances`);
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
    expect((err as Error).cause).toBeInstanceOf(TypeError);
    // The caller's own abort stays an AbortError.
    const ac = new AbortController();
    ac.abort();
    const aborted = await createClient({ baseUrl: server.url, token: TOKEN }).result("pd-none", { signal: ac.signal }).catch((e: unknown) => e);
    expect((aborted as Error).name).toBe("AbortError");
    const ok = await createClient<[typeof order, typeof other]>({ baseUrl: server.url, token: TOKEN }).start("pd_order", { amount: 2, orderId: "after" }, { instanceId: "pd-after" });
    expect((await ok.result({ timeoutSeconds: 20 })).status).toBe("completed");
  });
});
