/**
 * Problem responses: every error a client can cause maps to a 4xx with an
 * RFC 9457 problem body (`application/problem+json`): `type`, `title`,
 * `status`, `detail`, `instance`, plus the fields clients have always read as
 * extensions (`error` = detail, `error_type` = the kind, `issues`, …).
 * Anything else is a 500 with no details. Never a stack trace.
 *
 * `type` is `about:blank` throughout, so `title` is the HTTP status phrase
 * (RFC 9457 §4.2.1): the finer kind is `error_type`, and no URI is minted that
 * nothing would serve. `instance` is the request's path.
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { logError } from "../core/log.ts";
import { ConfigurationError, ConflictError, InvalidArgumentError, NotFoundError, PayloadTooLargeError, ValidationError } from "../core/errors.ts";
import { PayloadDecryptionError } from "../core/payload-codec.ts";

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

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  410: "Gone",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  421: "Misdirected Request",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

/** The RFC 9457 members of a problem plus today's fields as extensions (extensions never override the standard members). */
export function problemBody(status: number, detail: string, errorType: string, instance: string | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...extra,
    error: detail,
    error_type: errorType,
    type: "about:blank",
    title: TITLES[status] ?? (status >= 500 ? "Server Error" : "Client Error"),
    status,
    detail,
    ...(instance !== undefined ? { instance } : {}),
  };
}

/**
 * The challenge a 401 names (RFC 9110 §11.6.1 requires one): bearer tokens
 * for the API, the HMAC headers for internal routes and webhooks.
 */
export const BEARER_CHALLENGE = 'Bearer realm="edda"';

export function problem(c: Context, status: number, error: string, errorType: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  return c.body(JSON.stringify(problemBody(status, error, errorType, new URL(c.req.url).pathname, extra)), status as 400, {
    ...(status === 401 && !headers["www-authenticate"] ? { "www-authenticate": BEARER_CHALLENGE } : {}),
    ...headers,
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
export function configurationProblem(err: ConfigurationError, path?: string): Response {
  console.error(`edda: configuration error: ${err.message}`);
  const what = err.variable === "EDDA_API_TOKEN"
    ? "EDDA_API_TOKEN is not set (or set EDDA_ALLOW_UNAUTHENTICATED=1 to serve without authentication)"
    : `${err.variable ?? "a setting"} is missing or invalid`;
  return new Response(
    JSON.stringify(problemBody(503, `service unavailable: ${what}; see the server log`, "ConfigurationError", path, { retryable: false, ...(err.variable ? { variable: err.variable } : {}) })),
    { status: 503, headers: { "content-type": "application/problem+json" } },
  );
}

export function onError(err: unknown, c: Context) {
  if (err instanceof ConfigurationError) return configurationProblem(err, new URL(c.req.url).pathname);
  if (err instanceof InvalidArgumentError) return problem(c, 400, err.message, "BadRequest", { issues: err.issues });
  if (err instanceof ValidationError) return problem(c, 422, err.message, "ValidationError", { issues: err.issues });
  if (err instanceof NotFoundError) return problem(c, 404, err.message, "NotFoundError");
  if (err instanceof ConflictError) return problem(c, 409, err.message, "ConflictError");
  // A value over the largest one Edda stores (a start's input, a message's data): refused by name, nothing stored.
  if (err instanceof PayloadTooLargeError) return problem(c, 413, err.message, "PayloadTooLarge", { slot: err.slot, limit: err.limit });
  // A stored value this deployment cannot open (no key, a key it lacks, altered bytes): the server's fault, said plainly.
  if (err instanceof PayloadDecryptionError) return problem(c, 500, err.message, "PayloadDecryptionError", { reason: err.reason, retryable: false });
  if (err instanceof BadRequestError) return problem(c, err.status, err.message, err.status === 401 ? "Unauthorized" : err.status === 415 ? "UnsupportedMediaType" : "BadRequest", err.extra);
  if (err instanceof HTTPException) {
    const status = err.status;
    return problem(c, status, status === 413 ? "request body too large" : err.message || "bad request", status === 413 ? "PayloadTooLarge" : "BadRequest");
  }
  if (c.req.raw.signal?.aborted) {
    // The client went away (or was cut off by the server's body timeout) before its request arrived:
    // nobody reads this answer, and a thousand dropped uploads are not a thousand server errors in the log.
    return problem(c, 400, "the request was aborted before it arrived", "BadRequest");
  }
  if (isDataException(err)) {
    // A request value Postgres refuses (a NUL byte, an impossible timestamp…) reached a
    // query unchecked: still the client's input, so a 400 — logged, since a check is missing.
    logError("edda: request value refused by the database", err, { method: c.req.method, path: new URL(c.req.url).pathname }, "warn");
    return problem(c, 400, "a value in the request is not acceptable", "BadRequest");
  }
  logError("edda: unhandled error in request", err, { method: c.req.method, path: new URL(c.req.url).pathname });
  return problem(c, 500, "internal error", "InternalError");
}

/** The codes of the cause chain that look like a SQLSTATE (drizzle wraps driver errors; errno names like EPIPE are not). */
function sqlStates(err: unknown): string[] {
  const out: string[] = [];
  let e: unknown = err;
  for (let i = 0; i < 5 && typeof e === "object" && e !== null; i++, e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && !/^E[A-Z]{4}$/.test(code)) out.push(code);
  }
  return out;
}

/** The SQLSTATE of a database error (the innermost in the cause chain), or undefined. */
export const sqlStateOf = (err: unknown): string | undefined => sqlStates(err).at(-1);

/** SQLSTATE class 22 ("data exception") anywhere in the cause chain. */
export function isDataException(err: unknown): boolean {
  return sqlStates(err).some((code) => code.startsWith("22"));
}
