/**
 * Problem responses: every error a client can cause maps to a 4xx with a JSON
 * body `{ error, error_type, ... }`; anything else is a 500 with no details.
 * Never a stack trace.
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { ConflictError, NotFoundError, ValidationError } from "../core/errors.ts";

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

export function onError(err: unknown, c: Context) {
  if (err instanceof ValidationError) return problem(c, 422, err.message, "ValidationError", { issues: err.issues });
  if (err instanceof NotFoundError) return problem(c, 404, err.message, "NotFoundError");
  if (err instanceof ConflictError) return problem(c, 409, err.message, "ConflictError");
  if (err instanceof BadRequestError) return problem(c, err.status, err.message, err.status === 401 ? "Unauthorized" : "BadRequest", err.extra);
  if (err instanceof HTTPException) {
    const status = err.status;
    return problem(c, status, status === 413 ? "request body too large" : err.message || "bad request", status === 413 ? "PayloadTooLarge" : "BadRequest");
  }
  console.error("edda: unhandled error in request", err);
  return problem(c, 500, "internal error", "InternalError");
}

/** Parse a JSON request body; malformed → 400. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new BadRequestError("request body is not valid JSON");
  }
}
