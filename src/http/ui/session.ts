/**
 * Viewer security: the login session, the CSRF guard and per-response headers.
 *
 * - When an API token is configured the viewer asks for it once (POST
 *   /ui/login) and keeps a session cookie: HttpOnly, Secure, SameSite=Strict,
 *   path /ui, 12 h, whose value (a random session id and its expiry) is
 *   HMAC-signed with a key derived from the token and EDDA_SECRET — rotating
 *   either ends every session. Logging out revokes the session server-side
 *   (its id is stored until its expiry, storage/sessions.ts), so a copied
 *   cookie stops working too; a login writes nothing. The token never
 *   travels in a URL. (Browsers accept Secure cookies from
 *   http://localhost / 127.0.0.1; elsewhere the viewer needs HTTPS.)
 * - Every non-GET request must come from the viewer's own origin
 *   (an `Origin` among the configured hosts, else `Sec-Fetch-Site: same-origin`);
 *   with SameSite=Strict on the cookie that makes actions CSRF-safe.
 * - Each page gets a fresh CSP nonce: only the viewer's own inline style and
 *   script run, forms post only to the viewer, no framing.
 */
import type { Context, MiddlewareHandler } from "hono";
import { getSignedCookie, setSignedCookie, deleteCookie } from "hono/cookie";
import { timingSafeEqual } from "hono/utils/buffer";
import { originAllowed, type AllowedHosts } from "../guards.ts";

export const SESSION_COOKIE = "edda_ui";
const SESSION_SECONDS = 12 * 3600;

export interface SessionKeys {
  tokens: () => string[] | undefined;
  secret: () => string | undefined;
  /** Configured Host values: the origins actions may come from (guards.ts). */
  hosts?: AllowedHosts;
}

export type ViewerEnv = { Variables: { nonce: string } };

/** Where ended sessions are kept (the engine's database). */
export interface SessionStore {
  revoked(c: Context, sessionId: string): Promise<boolean>;
  revoke(c: Context, sessionId: string, expiresAt: Date): Promise<void>;
}

/** `<32 hex id>.<expiry in Unix seconds>`; the older value (an expiry alone) names no id and is refused: log in again. */
const SESSION_VALUE = /^([0-9a-f]{32})\.(\d{1,12})$/;

function keyFor(token: string, secret: string | undefined): string {
  return `edda-ui-session\u0000${secret ?? ""}\u0000${token}`;
}

export function authRequired(keys: SessionKeys): boolean {
  return (keys.tokens() ?? []).length > 0;
}

/** The token that `candidate` matches, compared in constant time. */
export async function matchToken(keys: SessionKeys, candidate: string): Promise<string | null> {
  for (const t of keys.tokens() ?? []) if (await timingSafeEqual(t, candidate)) return t;
  return null;
}

export async function startSession(c: Context, keys: SessionKeys, token: string): Promise<void> {
  const expires = Math.floor(Date.now() / 1000) + SESSION_SECONDS;
  const id = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  await setSignedCookie(c, SESSION_COOKIE, `${id}.${expires}`, keyFor(token, keys.secret()), {
    path: "/ui",
    httpOnly: true,
    secure: true,
    sameSite: "Strict",
    maxAge: SESSION_SECONDS,
  });
}

/** The request's session when its cookie is signed by a current key and unexpired (revocation aside). */
async function readSession(c: Context, keys: SessionKeys): Promise<{ id: string; expiresAt: Date } | null> {
  for (const t of keys.tokens() ?? []) {
    const value = await getSignedCookie(c, keyFor(t, keys.secret()), SESSION_COOKIE);
    const m = typeof value === "string" ? SESSION_VALUE.exec(value) : null;
    if (m && Number(m[2]) > Date.now() / 1000) return { id: m[1]!, expiresAt: new Date(Number(m[2]) * 1000) };
  }
  return null;
}

/** Log out: the session is revoked server-side first (a copy of the cookie dies with it), then the cookie is deleted. */
export async function endSession(c: Context, keys: SessionKeys, store: SessionStore): Promise<void> {
  const session = await readSession(c, keys);
  if (session) await store.revoke(c, session.id, session.expiresAt);
  deleteCookie(c, SESSION_COOKIE, { path: "/ui", httpOnly: true, secure: true, sameSite: "Strict" });
}

/** Whether the request carries a valid, unexpired, unrevoked session (or the bearer token itself). */
export async function hasSession(c: Context, keys: SessionKeys, store: SessionStore): Promise<boolean> {
  const bearer = /^Bearer\s+(.+)$/i.exec(c.req.header("authorization") ?? "");
  if (bearer && (await matchToken(keys, bearer[1]!.trim()))) return true;
  const session = await readSession(c, keys);
  return session !== null && !(await store.revoked(c, session.id));
}

/**
 * Refuses state-changing requests that do not come from the viewer's own
 * origin: an `Origin` among the configured hosts (not merely equal to the
 * request's Host, which a DNS-rebinding page controls), else
 * `Sec-Fetch-Site: same-origin`.
 */
export function sameOriginOnly(hosts: AllowedHosts = () => []): MiddlewareHandler {
  return async (c, next) => {
    if (["GET", "HEAD", "OPTIONS"].includes(c.req.method)) return next();
    const site = c.req.header("sec-fetch-site");
    const origin = c.req.header("origin") || undefined; // browsers never send an empty one
    const ok = origin !== undefined ? originAllowed(c, origin, hosts()) && (site === undefined || site === "same-origin") : site === "same-origin";
    if (!ok) return c.text("Forbidden: cross-origin request refused", 403);
    return next();
  };
}

/** A CSP nonce per response, plus the security headers of every viewer page. */
export function securityHeaders(): MiddlewareHandler<ViewerEnv> {
  return async (c, next) => {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    const nonce = btoa(String.fromCharCode(...bytes));
    c.set("nonce", nonce);
    await next();
    c.res.headers.set(
      "content-security-policy",
      `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    );
    c.res.headers.set("x-content-type-options", "nosniff");
    c.res.headers.set("referrer-policy", "same-origin");
    c.res.headers.set("cache-control", "no-store");
  };
}
