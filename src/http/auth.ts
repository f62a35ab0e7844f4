/**
 * Authentication: internal routes (follow-up steps, sweep) always require an
 * HMAC signature with EDDA_SECRET; when an API token is configured, every other
 * route except /healthz requires `Authorization: Bearer <token>`.
 */
import type { Context, MiddlewareHandler } from "hono";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verify } from "../core/signature.ts";
import { problem } from "./problem.ts";

function constantTimeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

/** `extra(c)`: more tokens accepted on this request (CloudEvents ingestion's own token). */
export function bearerAuth(tokens: () => string[] | undefined, extra?: (c: Context) => string[] | undefined): MiddlewareHandler {
  return async (c, next) => {
    const allowed = [...(tokens() ?? []), ...(extra?.(c) ?? [])];
    if (!allowed?.length) return next();
    const header = c.req.header("authorization") ?? "";
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (!m || !allowed.some((t) => constantTimeEqual(m[1]!.trim(), t))) {
      return problem(c, 401, "missing or invalid bearer token", "Unauthorized");
    }
    return next();
  };
}

/** Verifies the signature over the raw body; the body stays readable downstream. */
export function signedOnly(secret: () => string | undefined): MiddlewareHandler {
  return async (c, next) => {
    const key = secret();
    if (!key) return problem(c, 401, "internal routes are disabled: no EDDA_SECRET configured", "Unauthorized");
    const body = await c.req.text();
    const ok = await verify(key, body, c.req.header(TIMESTAMP_HEADER), c.req.header(SIGNATURE_HEADER));
    if (!ok) return problem(c, 401, "missing or invalid signature", "Unauthorized");
    return next();
  };
}
