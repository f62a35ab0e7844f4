/**
 * The front-door checks that stand in for a token when there is none, and
 * the origin check every browser-facing route shares.
 *
 * - Hosts: the Host values this server is configured to answer to
 *   (EDDA_ALLOWED_HOSTS, EDDA_PUBLIC_URL's host, and on Node the loopback
 *   names with the bound port). An entry without a port matches any port.
 * - Open mode (no API token): a request whose Host is neither a loopback name
 *   nor a configured host is refused (421) — a DNS-rebinding page reaches the
 *   server under its own name, so it gets nothing; and a request a browser
 *   sent from another origin (its `Origin` header) is refused (403), since
 *   nothing else would tell it from the user's own. Health probes and the
 *   signed internal routes are exempt: probes name whatever host the
 *   platform uses, internal calls carry a MAC keyed by EDDA_SECRET (not over the host: core/signature.ts).
 * - Origins (MCP, viewer actions, open-mode API writes) are checked against
 *   the configured hosts; only when none is configured (a library user's own
 *   server, a Worker without EDDA_PUBLIC_URL) against the request's own host,
 *   which open mode has checked above and token mode guards with the token.
 */
import type { Context, MiddlewareHandler } from "hono";
import { isJsonContentType } from "./body.ts";
import { problem } from "./problem.ts";
import { TrustedProxies } from "./client-address.ts";

/** Configured Host values (lower case, `host` or `host:port`). */
export type AllowedHosts = () => readonly string[];

const LOOPBACK = /^(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\])(:\d{1,5})?$/;

/** Whether `host` (a Host header value) is one of `allowed` (an entry without a port matches any port). */
export function hostMatches(host: string, allowed: readonly string[]): boolean {
  const h = host.toLowerCase();
  const bare = h.replace(/:\d{1,5}$/, "");
  return allowed.some((a) => a === h || (!/:\d{1,5}$/.test(a) && a === bare));
}

export const isLoopbackHost = (host: string): boolean => LOOPBACK.test(host.toLowerCase());

/** The Host header as the app sees it (the request URL's host). */
export const requestHost = (c: Context): string => new URL(c.req.url).host.toLowerCase();

/** Whether a browser `Origin` is one this server serves (see the module comment). */
export function originAllowed(c: Context, origin: string, hosts: readonly string[]): boolean {
  let host: string;
  try {
    const url = new URL(origin);
    if (url.protocol !== "http:" && url.protocol !== "https:") return false;
    host = url.host.toLowerCase();
  } catch {
    return false; // "null" (sandboxed frames, file:) or garbage
  }
  return hosts.length ? hostMatches(host, hosts) : host === requestHost(c);
}

const EXEMPT = (path: string) => path === "/healthz" || path === "/readyz" || path.startsWith("/_edda/");

/** Open mode only: loopback or configured Host values, and no writes from another browser origin. */
export function openModeGuard(opts: { open: () => boolean; hosts: AllowedHosts }): MiddlewareHandler {
  return async (c, next) => {
    if (!opts.open() || EXEMPT(new URL(c.req.url).pathname)) return next();
    const hosts = opts.hosts();
    const host = requestHost(c);
    if (!isLoopbackHost(host) && !hostMatches(host, hosts)) {
      return problem(c, 421, `this server does not serve the host "${host.slice(0, 100)}" without an API token (set EDDA_ALLOWED_HOSTS or EDDA_API_TOKEN)`, "MisdirectedRequest");
    }
    const origin = c.req.header("origin");
    if (origin !== undefined && !["GET", "HEAD", "OPTIONS"].includes(c.req.method) && !originAllowed(c, origin, hosts)) {
      return problem(c, 403, "cross-origin request refused", "Forbidden");
    }
    return next();
  };
}

/**
 * Every write to the JSON API declares JSON (or sends no Content-Type at
 * all): `text/plain`, forms and multipart are the "simple" requests a page on
 * another origin can send without a CORS preflight, so they answer 415 before
 * any route runs — including routes that read no body (cancel). CloudEvents
 * ingestion takes its own types (cloudevent-modes.ts).
 */
export function jsonWritesOnly(isIngestion: (c: Context) => boolean): MiddlewareHandler {
  return async (c, next) => {
    if (["GET", "HEAD", "OPTIONS"].includes(c.req.method) || isIngestion(c)) return next();
    const type = c.req.header("content-type");
    if (type !== undefined && !isJsonContentType(type)) return problem(c, 415, `Content-Type must be application/json, got "${type.slice(0, 100)}"`, "UnsupportedMediaType");
    return next();
  };
}

/**
 * Failed credential checks (bearer tokens, viewer logins) per client, in this
 * process. The credential is always compared first and a right one always
 * passes: the throttle only changes how a *failure* is answered — past
 * `limit` failures within `windowMs` from one client, 429 with Retry-After
 * instead of 401 — so nobody can lock a valid token out by failing from the
 * same address (a NAT, a proxy) first. It bounds what a misbehaving client
 * costs, not what a guesser learns (each answer still says right or wrong):
 * that is the token's length. The client is its address where the platform
 * tells it (Node's socket, Cloudflare's cf-connecting-ip; behind a proxy the
 * operator names in EDDA_TRUSTED_PROXIES, its X-Forwarded-For: client-address.ts);
 * where it does not, nothing is throttled. Per process: each Worker isolate
 * counts its own.
 */
export class FailureThrottle {
  private readonly failures = new Map<string, number[]>();
  constructor(
    readonly limit = 20,
    readonly windowMs = 60_000,
  ) {}

  /** Record a failure of `key`; the milliseconds it must wait before its failures are answered 401 again, or 0. */
  fail(key: string | undefined, now = Date.now()): number {
    if (key === undefined) return 0;
    if (this.failures.size > 10_000 && !this.failures.has(key)) this.failures.clear(); // bounded memory under a spray of addresses
    const recent = (this.failures.get(key) ?? []).filter((t) => now - t < this.windowMs);
    recent.push(now);
    this.failures.set(key, recent.slice(-(this.limit + 1)));
    if (recent.length <= this.limit) return 0;
    return this.windowMs - (now - recent[recent.length - 1 - this.limit]!);
  }
}

/** The client's address as the platform reports it (a trusted proxy's X-Forwarded-For: client-address.ts), or undefined. */
export function clientKey(c: Context, trusted: TrustedProxies = TrustedProxies.none): string | undefined {
  const incoming = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming;
  const peer = incoming?.socket?.remoteAddress ?? c.req.header("cf-connecting-ip");
  if (peer === undefined) return undefined;
  return trusted.size ? trusted.clientOf(peer, c.req.header("x-forwarded-for")) : peer;
}

export function tooManyFailures(c: Context, retryMs: number): Response {
  const res = problem(c, 429, "too many failed authentication attempts; try again later", "TooManyRequests");
  res.headers.set("retry-after", String(Math.max(1, Math.ceil(retryMs / 1000))));
  return res;
}
