// Structured log lines (core/log.ts): one JSON object per line with the
// message, the caller's fields, the error's class and the innermost SQLSTATE
// of its cause chain — never the error's text, which may quote SQL
// parameters or payloads, unless debugging asks for it.
import { afterEach, describe, expect, it, vi } from "vitest";
import { errorFields, logError, setLogDebug } from "../../src/core/log.ts";

class DrizzleQueryError extends Error {}
const dbError = () => {
  const pg = Object.assign(new Error('duplicate key value violates unique constraint "x": Key (data)=(secret payload)'), { name: "PostgresError", code: "23505" });
  return new DrizzleQueryError("Failed query: insert into t values ($1) params: secret payload", { cause: pg });
};

afterEach(() => {
  vi.restoreAllMocks();
  setLogDebug(false);
});

describe("log lines", () => {
  it("errorFields: the class (the constructor's when name is just Error), the innermost SQLSTATE, the cause's class; errno names are no SQLSTATE", () => {
    expect(errorFields(dbError())).toEqual({ error_class: "DrizzleQueryError", sqlstate: "23505", cause_class: "PostgresError" });
    expect(errorFields(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }))).toEqual({ error_class: "Error" });
    expect(errorFields(new TypeError("x"))).toEqual({ error_class: "TypeError" });
    expect(errorFields("a string")).toEqual({ error_class: "string" });
  });

  it("logError writes one JSON line without the error's text; warn goes to console.warn", () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    logError("edda: step failed", dbError(), { instance_id: "i-1", attempt: 2 });
    logError("edda: refused", new TypeError("bad"), {}, "warn");
    expect(error).toHaveBeenCalledTimes(1);
    const line = String(error.mock.calls[0]![0]);
    expect(line).not.toContain("\n");
    expect(JSON.parse(line)).toEqual({ level: "error", msg: "edda: step failed", instance_id: "i-1", attempt: 2, error_class: "DrizzleQueryError", sqlstate: "23505", cause_class: "PostgresError" });
    expect(line).not.toContain("secret payload");
    expect(JSON.parse(String(warn.mock.calls[0]![0]))).toEqual({ level: "warn", msg: "edda: refused", error_class: "TypeError" });
  });

  it("with debugging on, the full error is added", () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    setLogDebug(true);
    logError("edda: step failed", dbError());
    const line = JSON.parse(String(error.mock.calls[0]![0])) as { error: { message: string; cause: string } };
    expect(line.error.message).toContain("secret payload");
    expect(line.error.cause).toContain("duplicate key");
  });
});
