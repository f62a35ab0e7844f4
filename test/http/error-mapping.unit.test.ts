// How an error that reaches a request becomes its answer (http/problem.ts
// onError): the typed errors map to their 4xx problems (400 InvalidArgument,
// 422 Validation with issues, 404, 409, a BadRequestError's own status), a
// ConfigurationError to a 503 naming only the variable (its message, which
// may quote a value, goes to the log), a value Postgres refuses (SQLSTATE
// class 22 anywhere in the cause chain) to a 400, a request whose client went
// away to a 400 — and anything else to a 500 that says nothing but "internal
// error": no message, no stack. A tiny Hono app whose routes throw; no
// database.
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConfigurationError, ConflictError, InvalidArgumentError, NotFoundError, ValidationError } from "../../src/core/errors.ts";
import { BadRequestError, isDataException, onError, sqlStateOf } from "../../src/http/problem.ts";

const pgError = (code: string, message: string) => Object.assign(new Error(message), { name: "PostgresError", code });
const wrapped = (cause: unknown) => new Error("Failed query: select $1 params: secret", { cause });

function appThrowing(err: unknown) {
  const app = new Hono();
  app.onError(onError);
  app.all("/x", () => {
    throw err;
  });
  return app;
}
const answer = async (err: unknown, init?: RequestInit) => {
  const r = await appThrowing(err).request("/x", init);
  return { status: r.status, type: r.headers.get("content-type"), body: (await r.json()) as Record<string, unknown> };
};

afterEach(() => vi.restoreAllMocks());

describe("errors to problems", () => {
  it("the typed errors answer their 4xx, with issues where they carry them", async () => {
    expect(await answer(new InvalidArgumentError("bad cursor", [{ path: ["cursor"] }]))).toMatchObject({ status: 400, type: "application/problem+json", body: { error_type: "BadRequest", issues: [{ path: ["cursor"] }] } });
    expect(await answer(new ValidationError("bad input", [{ path: ["amount"] }]))).toMatchObject({ status: 422, body: { error_type: "ValidationError", detail: "bad input", issues: [{ path: ["amount"] }] } });
    expect(await answer(new NotFoundError("no such thing"))).toMatchObject({ status: 404, body: { error_type: "NotFoundError", instance: "/x" } });
    expect(await answer(new ConflictError("already finished"))).toMatchObject({ status: 409, body: { error_type: "ConflictError" } });
    expect(await answer(new BadRequestError("wrong type", 415))).toMatchObject({ status: 415, body: { error_type: "UnsupportedMediaType" } });
    expect(await answer(new BadRequestError("who?", 401, { hint: "x" }))).toMatchObject({ status: 401, body: { error_type: "Unauthorized", hint: "x" } });
    expect(await answer(new HTTPException(413))).toMatchObject({ status: 413, body: { error_type: "PayloadTooLarge", detail: "request body too large" } });
  });

  it("a ConfigurationError is a 503 naming the variable; its message is logged, never answered", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const r = await answer(new ConfigurationError("EDDA_SECRET=hunter2 is too short", "EDDA_SECRET"));
    expect(r).toMatchObject({ status: 503, body: { error_type: "ConfigurationError", variable: "EDDA_SECRET", retryable: false } });
    expect(JSON.stringify(r.body)).not.toContain("hunter2");
    expect(String(logged.mock.calls[0]![0])).toContain("hunter2");
  });

  it("a value Postgres refuses (SQLSTATE 22xxx in the chain) is the client's 400; other database errors and the rest are a bare 500", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const data = await answer(wrapped(pgError("22P05", "unsupported Unicode escape sequence")));
    expect(data).toMatchObject({ status: 400, body: { error_type: "BadRequest", detail: "a value in the request is not acceptable" } });
    expect(JSON.parse(String(warn.mock.calls[0]![0]))).toMatchObject({ level: "warn", sqlstate: "22P05" });
    for (const err of [wrapped(pgError("40001", "could not serialize")), new TypeError("x is undefined at secret.ts:12"), pgError("XX000", "internal: relation secret_table")]) {
      const r = await answer(err);
      expect(r.body).toEqual({ error: "internal error", error_type: "InternalError", type: "about:blank", title: "Internal Server Error", status: 500, detail: "internal error", instance: "/x" });
    }
    expect(error).toHaveBeenCalledTimes(3);
  });

  it("a request whose client went away is a 400, not a server error in the log", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const ac = new AbortController();
    ac.abort();
    const r = await appThrowing(new Error("body stream aborted")).request(new Request("http://localhost/x", { signal: ac.signal }));
    expect(r.status).toBe(400);
    expect(error).not.toHaveBeenCalled();
  });

  it("sqlStateOf is the innermost SQLSTATE; errno names (EPIPE, ECONNRESET) are none", () => {
    expect(sqlStateOf(wrapped(wrapped(pgError("23505", "dup"))))).toBe("23505");
    expect(sqlStateOf(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }))).toBeUndefined();
    expect(sqlStateOf(Object.assign(new Error("reset"), { code: "ECONNRESET" }))).toBeUndefined();
    expect(isDataException(wrapped(pgError("22001", "value too long")))).toBe(true);
    expect(isDataException(pgError("23505", "dup"))).toBe(false);
  });
});
