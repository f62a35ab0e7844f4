/**
 * Problem responses: every error a client can cause maps to a 4xx with a JSON
 * body `{ error, error_type, ... }`; anything else is a 500 with no details.
 * Never a stack trace.
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { ConfigurationError, ConflictError, InvalidArgumentError, NotFoundError, ValidationError } from "../core/errors.ts";

export class BadRequestError extends Error {
  override name = "BadRequestError";
  constructor(
    message: string,
    readonly status: 400 | 401 | 413 | 415 = 400,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export function problem(c: Context, status: number, error: string, errorType: string, extra: Record<string, unknown> = {}) {
  return c.body(JSON.stringify({ error, error_type: errorType, ...extra }), status as 400, {
    "content-type": "application/problem+json",
  });
}

/** 404 for an instance route whose instance does not exist. */
export function instanceNotFound(c: Context, instanceId: string) {
  return problem(c, 404, `instance "${instanceId}" not found`, "NotFoundError");
}

/**
 * The answer to a request the server cannot serve because of its configuration:
 * 503 naming the variable to fix; the full message (which may quote a value)
 * goes only to the log.
 */
export function configurationProblem(err: ConfigurationError): Response {
  console.error(`edda: configuration error: ${err.message}`);
  const what = err.variable === "EDDA_API_TOKEN"
    ? "EDDA_API_TOKEN is not set (or set EDDA_ALLOW_UNAUTHENTICATED=1 to serve without authentication)"
    : `${err.variable ?? "a setting"} is missing or invalid`;
  return new Response(
    JSON.stringify({ error: `service unavailable: ${what}; see the server log`, error_type: "ConfigurationError", retryable: false, ...(err.variable ? { variable: err.variable } : {}) }),
    { status: 503, headers: { "content-type": "application/problem+json" } },
  );
}

export function onError(err: unknown, c: Context) {
  if (err instanceof ConfigurationError) return configurationProblem(err);
  if (err instanceof InvalidArgumentError) return problem(c, 400, err.message, "BadRequest", { issues: err.issues });
  if (err instanceof ValidationError) return problem(c, 422, err.message, "ValidationError", { issues: err.issues });
  if (err instanceof NotFoundError) return problem(c, 404, err.message, "NotFoundError");
  if (err instanceof ConflictError) return problem(c, 409, err.message, "ConflictError");
  if (err instanceof BadRequestError) return problem(c, err.status, err.message, err.status === 401 ? "Unauthorized" : "BadRequest", err.extra);
  if (err instanceof HTTPException) {
    const status = err.status;
    return problem(c, status, status === 413 ? "request body too large" : err.message || "bad request", status === 413 ? "PayloadTooLarge" : "BadRequest");
  }
  if (isDataException(err)) {
    // A request value Postgres refuses (a NUL byte, an impossible timestamp…) reached a
    // query unchecked: still the client's input, so a 400 — logged, since a check is missing.
    console.warn("edda: request value refused by the database", err);
    return problem(c, 400, "a value in the request is not acceptable", "BadRequest");
  }
  console.error("edda: unhandled error in request", err);
  return problem(c, 500, "internal error", "InternalError");
}

/** SQLSTATE class 22 ("data exception") anywhere in the cause chain (drizzle wraps driver errors). */
export function isDataException(err: unknown): boolean {
  let e: unknown = err;
  for (let i = 0; i < 5 && typeof e === "object" && e !== null; i++, e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^22[0-9A-Z]{3}$/.test(code)) return true;
  }
  return false;
}

/**
 * Deepest array/object nesting accepted in a JSON body. Payloads are
 * serialized and revived recursively (JSON.stringify with a replacer,
 * JSON.parse with a reviver), which overflows the stack a few thousand levels
 * down; real payloads stay far below this.
 */
export const MAX_JSON_DEPTH = 512;

/** Whether `text` nests arrays/objects deeper than MAX_JSON_DEPTH (string contents are skipped). */
export function jsonTooDeep(text: string): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92 /* \ */) i++;
      else if (ch === 34 /* " */) inString = false;
    } else if (ch === 34) inString = true;
    else if (ch === 91 /* [ */ || ch === 123 /* { */) {
      if (++depth > MAX_JSON_DEPTH) return true;
    } else if (ch === 93 /* ] */ || ch === 125 /* } */) depth--;
  }
  return false;
}

/** Parse a JSON request body; malformed → 400. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") return {};
  if (jsonTooDeep(text)) throw new BadRequestError(`request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  try {
    return JSON.parse(text);
  } catch {
    throw new BadRequestError("request body is not valid JSON");
  }
}
