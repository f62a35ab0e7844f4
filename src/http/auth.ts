/**
 * Authentication: internal routes (follow-up steps, sweep) always require an
 * HMAC signature with EDDA_SECRET; when an API token is configured, every other
 * route except /healthz requires `Authorization: Bearer <token>`. CloudEvents
 * ingestion also accepts the events token, which by default may not target
 * instances (`eddainstanceid`): the route reads who called with `callerOf`.
 */
import type { Context, MiddlewareHandler } from "hono";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verify } from "../core/signature.ts";
import { clientKey, FailureThrottle, tooManyFailures } from "./guards.ts";
import { BEARER_CHALLENGE, problem } from "./problem.ts";

/** The challenge of the signed internal routes: the two headers, keyed by EDDA_SECRET. */
const SIGNATURE_CHALLENGE = `EddaSignature realm="edda-internal", headers="${TIMESTAMP_HEADER} ${SIGNATURE_HEADER}"`;

/** Who a request authenticated as: the API token, the events token, or nobody because no token is configured. */
export type Caller = { kind: "api" } | { kind: "events"; mayTarget: boolean } | { kind: "open" };

declare module "hono" {
  interface ContextVariableMap {
    eddaCaller: Caller;
  }
}

export function callerOf(c: Context): Caller {
  return c.get("eddaCaller") ?? { kind: "open" };
}

function constantTimeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

export interface BearerAuthOptions {
  apiTokens: () => string[] | undefined;
  /** Tokens accepted on CloudEvents ingestion only. */
  eventsTokens?: () => string[] | undefined;
  isIngestion: (c: Context) => boolean;
  /** The events token may set `eddainstanceid` (default false). */
  eventsTokenTargeting?: boolean;
  /** Who counts as the client for the failure throttle (guards.ts). */
  clientKey?: (c: Context) => string | undefined;
}

export function bearerAuth(opts: BearerAuthOptions): MiddlewareHandler {
  const throttle = new FailureThrottle();
  return async (c, next) => {
    const api = opts.apiTokens() ?? [];
    const events = opts.isIngestion(c) ? (opts.eventsTokens?.() ?? []) : [];
    if (!api.length && !events.length) {
      c.set("eddaCaller", { kind: "open" });
      return next();
    }
    const m = /^Bearer\s+(.+)$/i.exec(c.req.header("authorization") ?? "");
    const presented = m?.[1]!.trim();
    // Every comparison runs, so timing does not tell which list matched.
    const isApi = presented !== undefined && api.map((t) => constantTimeEqual(presented, t)).includes(true);
    const isEvents = presented !== undefined && events.map((t) => constantTimeEqual(presented, t)).includes(true);
    if (isApi) c.set("eddaCaller", { kind: "api" });
    else if (isEvents) c.set("eddaCaller", { kind: "events", mayTarget: opts.eventsTokenTargeting === true });
    else {
      // Compared first: another client's failures (behind the same NAT or proxy) never refuse a right token.
      const wait = throttle.fail((opts.clientKey ?? clientKey)(c));
      if (wait > 0) return tooManyFailures(c, wait);
      // RFC 6750 §3: no error code when no credentials came, invalid_token when a wrong one did.
      const challenge = presented === undefined ? BEARER_CHALLENGE : `${BEARER_CHALLENGE}, error="invalid_token"`;
      const which = events.length ? "EDDA_API_TOKEN (or EDDA_EVENTS_TOKEN)" : "EDDA_API_TOKEN";
      return problem(c, 401, `missing or invalid bearer token: send "Authorization: Bearer <token>" with the token this server has in ${which}`, "Unauthorized", {}, { "www-authenticate": challenge });
    }
    return next();
  };
}

/** Verifies the signature over method, path, query, timestamp and raw body; the body stays readable downstream. */
export function signedOnly(secret: () => string | undefined): MiddlewareHandler {
  return async (c, next) => {
    const key = secret();
    if (!key) {
      // A configuration problem: logged for the operator; the caller learns no more than for a bad signature.
      console.error("edda: configuration error: an internal route was called but EDDA_SECRET is not set");
      return problem(c, 401, "missing or invalid signature", "Unauthorized", {}, { "www-authenticate": SIGNATURE_CHALLENGE });
    }
    const body = await c.req.text();
    const url = new URL(c.req.url);
    const request = { method: c.req.method, path: url.pathname, query: url.search, body };
    const ok = await verify(key, request, c.req.header(TIMESTAMP_HEADER), c.req.header(SIGNATURE_HEADER));
    if (!ok) return problem(c, 401, "missing or invalid signature", "Unauthorized", {}, { "www-authenticate": SIGNATURE_CHALLENGE });
    return next();
  };
}
