/**
 * The configuration every platform reads from its environment, parsed in one
 * shape. Each platform adapter passes its own variables in (process.env,
 * Deno.env, Worker bindings); nothing else reads the environment.
 *
 * Secure by default: a token variable that is set but empty is a
 * ConfigurationError (it would otherwise silently mean "no auth"), and
 * `unauthenticatedRefusal` says when an API reachable from the network has
 * no API token and no explicit EDDA_ALLOW_UNAUTHENTICATED=1. Configuration
 * errors go to the log in full; a client only learns which variable to fix.
 *
 * One precedence on every platform (`withEnvironment`): an option the caller
 * passes explicitly wins; else the environment variable; else the platform's
 * default.
 */
import { ConfigurationError } from "../core/errors.ts";
import type { EddaOptions } from "../edda.ts";
import { TrustedProxies } from "../http/client-address.ts";

export { ConfigurationError };
export interface EddaEnv {
  DATABASE_URL?: string;
  DATABASE_DRIVER?: string;
  NEON_WS_PROXY?: string;
  EDDA_SECRET?: string;
  EDDA_ENCRYPTION_KEY?: string;
  EDDA_ENCRYPTION_KEYS?: string;
  EDDA_API_TOKEN?: string;
  EDDA_EVENTS_TOKEN?: string;
  EDDA_EVENTS_TOKEN_TARGETING?: string;
  EDDA_ALLOW_UNAUTHENTICATED?: string;
  EDDA_BROKER_URL?: string;
  EDDA_SERVICE_NAME?: string;
  EDDA_DEPLOYMENT?: string;
  EDDA_SWEEP_EXPECTED_SECONDS?: string;
  EDDA_CPU_BUDGET_MS?: string;
  EDDA_PUBLIC_URL?: string;
  EDDA_ALLOWED_HOSTS?: string;
  EDDA_TRUSTED_PROXIES?: string;
  EDDA_MAX_STREAMS?: string;
  EDDA_BODY_TIMEOUT_SECONDS?: string;
  EDDA_MAX_BODY_BYTES?: string;
  EDDA_SWEEP_INTERVAL_MS?: string;
  EDDA_SWEEP_CPU_MS?: string;
  EDDA_CONSUMER_CPU_MS?: string;
  EDDA_MAX_WAKE_SECONDS?: string;
  EDDA_SUBREQUEST_LIMIT?: string;
  EDDA_MAX_HOPS?: string;
  EDDA_DISPATCHER?: string;
  EDDA_STEP_CONCURRENCY?: string;
  EDDA_LEASE_SECONDS?: string;
  EDDA_HANDOFF_LEASE_SECONDS?: string;
  EDDA_METRICS?: string;
  EDDA_PGLITE_TEMPLATE_CACHE?: string;
  [key: string]: unknown;
}

export interface EddaConfig {
  databaseUrl: string | undefined;
  /** DATABASE_DRIVER; unset → the platform's default (postgres.js, or the first driver an edge adapter was given). */
  driver: "postgres-js" | "neon-serverless" | undefined;
  neonWsProxy: string | undefined;
  secret: string | undefined;
  /** EDDA_ENCRYPTION_KEYS (comma-separated, newest first) or EDDA_ENCRYPTION_KEY: base64 of 32 bytes each. */
  encryptionKeys: string[] | undefined;
  apiToken: string | undefined;
  /** A separate bearer token accepted by CloudEvents ingestion (`POST /`, `/events`). */
  eventsToken: string | undefined;
  /** The events token may target instances with `eddainstanceid` (EDDA_EVENTS_TOKEN_TARGETING=1). */
  eventsTokenTargeting: boolean;
  /** Serve the API without a token, explicitly (EDDA_ALLOW_UNAUTHENTICATED=1). */
  allowUnauthenticated: boolean;
  brokerUrl: string | undefined;
  serviceName: string;
  deployment: string | undefined;
  sweepExpectedSeconds: number | undefined;
  /** EDDA_CPU_BUDGET_MS: the CPU one invocation may spend (why's history-size warning). */
  cpuBudgetMs: number | undefined;
  publicUrl: string | undefined;
  /** Host values the server answers to besides loopback names (EDDA_ALLOWED_HOSTS, comma-separated, and EDDA_PUBLIC_URL's host). */
  allowedHosts: string[];
  /** Proxies whose X-Forwarded-For names the client (EDDA_TRUSTED_PROXIES, comma-separated addresses or CIDR ranges). */
  trustedProxies: string[];
  /** Open event streams one process serves at once (EDDA_MAX_STREAMS; unset → 256). */
  maxOpenStreams: number | undefined;
  /** Node: how long a request (headers and body) may take to arrive before it is answered 408 (EDDA_BODY_TIMEOUT_SECONDS; unset → 30). */
  bodyTimeoutSeconds: number | undefined;
  /** The largest request body the API takes (EDDA_MAX_BODY_BYTES; unset → 1 MiB): raise it to start with, or send, values that go by reference (up to 32 MiB each). */
  maxBodyBytes: number | undefined;
  /** Interval sweeps for servers without a platform cron (ms; unset → the platform's default). */
  sweepIntervalMs: number | undefined;
  /** CPU budget of a cron sweep on Workers (ms; unset → 10, the Free plan's limit; 0 → none). */
  sweepCpuMs: number | undefined;
  /** CPU budget of a queue consumer invocation on Workers, the steps it chains held to it by estimate (ms; unset → 10, the Free plan's limit; 0 → no chain). */
  consumerCpuMs: number | undefined;
  /** Long-lived servers with the http dispatcher (Node): timers due within this many seconds fire in-process. */
  maxWakeSeconds: number | undefined;
  /** Outgoing fetches per invocation (unset → the platform's default: 40 on Workers, none elsewhere). */
  subrequestLimit: number | undefined;
  /** Follow-up hops a fetch chain may take (unset → the platform's bound: 8 on Workers, none elsewhere). */
  maxHops: number | undefined;
  /** EDDA_DISPATCHER=http: follow-ups as signed fetches (Node: instead of in-process; Workers: before the queue, which continues a chain at the hop bound). */
  fetchDispatcher: boolean;
  /** Steps the in-process dispatcher runs at once (Node; unset → 8). A step waiting on a non-transactional activity holds none. */
  stepConcurrency: number | undefined;
  /** Lease of a running step (default 300 s) and of a handed-off follow-up (default 30 s): how soon a crashed step is resumed. */
  leaseSeconds: number | undefined;
  handoffLeaseSeconds: number | undefined;
  /** EDDA_METRICS=prometheus (Node): OpenTelemetry metrics served at GET /metrics; "off" refuses an app's default of on. */
  metrics: "prometheus" | "off" | undefined;
  /** EDDA_RETENTION_DAYS: how long finished instances, channel messages and CloudEvent dedupe rows are kept (default 7). */
  retention: { finishedInstancesSeconds: number; channelMessagesSeconds: number; cloudEventDedupeSeconds: number } | undefined;
  /** EDDA_WEBHOOK_<NAME>_SECRET, by webhook name (`stripe`), each a comma-separated list (rotation: all are accepted). */
  webhookSecrets: Record<string, string[]> | undefined;
  /**
   * Where the Node adapter keeps PGlite's pre-initialised data folder, copied
   * into a fresh data folder instead of running initdb: EDDA_PGLITE_TEMPLATE_CACHE
   * (`0`: none), else $XDG_CACHE_HOME/edda-edge, else ~/.cache/edda-edge.
   */
  pgliteTemplateCache: string | undefined;
}

const str = (v: unknown) => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);

function num(env: EddaEnv, name: string): number | undefined {
  const v = str(env[name]);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new ConfigurationError(`${name} must be a number ≥ 0, got "${v}"`, name);
  return n;
}

/** A token: unset is fine, set-but-blank is a mistake that must not turn authentication off. */
function token(env: EddaEnv, name: string): string | undefined {
  const v = env[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || v.trim() === "") throw new ConfigurationError(`${name} is set but empty: give it a token, or remove it`, name);
  return v.trim();
}

function flag(env: EddaEnv, name: string): boolean {
  const v = str(env[name])?.toLowerCase();
  if (v === undefined || v === "0" || v === "false") return false;
  if (v === "1" || v === "true") return true;
  throw new ConfigurationError(`${name} must be 1 or 0, got "${v}"`, name);
}

function retentionDays(env: EddaEnv): EddaConfig["retention"] {
  const days = num(env, "EDDA_RETENTION_DAYS");
  if (days === undefined) return undefined;
  const seconds = days * 86_400;
  return { finishedInstancesSeconds: seconds, channelMessagesSeconds: seconds, cloudEventDedupeSeconds: seconds };
}

/** The Host values a configuration names: EDDA_ALLOWED_HOSTS (comma-separated `host` or `host:port`) and EDDA_PUBLIC_URL's host. */
export function configuredHosts(allowedHosts: string | undefined, publicUrl: string | undefined): string[] {
  const out = (allowedHosts ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
  if (publicUrl) {
    try {
      out.push(new URL(publicUrl).host.toLowerCase());
    } catch {
      throw new ConfigurationError(`EDDA_PUBLIC_URL is not a URL`, "EDDA_PUBLIC_URL");
    }
  }
  return out;
}

/** EDDA_TRUSTED_PROXIES: comma-separated addresses or CIDR ranges, each checked now so a typo is not a silent "trust nobody". */
function trustedProxies(text: string | undefined): string[] {
  const list = (text ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  try {
    TrustedProxies.parse(list);
  } catch (err) {
    throw new ConfigurationError(`EDDA_TRUSTED_PROXIES: ${(err as Error).message}`, "EDDA_TRUSTED_PROXIES");
  }
  return list;
}

const WEBHOOK_SECRET = /^EDDA_WEBHOOK_([A-Z][A-Z0-9_]*)_SECRET$/;

/** Every EDDA_WEBHOOK_<NAME>_SECRET; set-but-empty is a mistake, like a blank token. */
function webhookSecrets(env: EddaEnv): Record<string, string[]> | undefined {
  const out: Record<string, string[]> = {};
  for (const key of Object.keys(env)) {
    const m = WEBHOOK_SECRET.exec(key);
    if (!m) continue;
    const list = String(token(env, key)).split(",").map((s) => s.trim()).filter(Boolean);
    if (list.length === 0) throw new ConfigurationError(`${key} holds no secret: give it one (or several, comma-separated), or remove it`, key);
    out[m[1]!.toLowerCase()] = list;
  }
  return Object.keys(out).length ? out : undefined;
}

/** EDDA_ENCRYPTION_KEYS wins over EDDA_ENCRYPTION_KEY; set-but-empty is a mistake (it would store payloads in the clear). */
function encryptionKeys(env: EddaEnv): string[] | undefined {
  for (const key of ["EDDA_ENCRYPTION_KEYS", "EDDA_ENCRYPTION_KEY"] as const) {
    const v = token(env, key);
    if (v === undefined) continue;
    const list = String(v).split(",").map((s) => s.trim()).filter(Boolean);
    if (list.length === 0) throw new ConfigurationError(`${key} holds no key: give it one (base64 of 32 bytes), or remove it`, key);
    if (key === "EDDA_ENCRYPTION_KEY" && list.length > 1) throw new ConfigurationError("EDDA_ENCRYPTION_KEY holds one key; several (newest first) go in EDDA_ENCRYPTION_KEYS", key);
    return list;
  }
  return undefined;
}

function pgliteTemplateCache(env: EddaEnv): string | undefined {
  const set = str(env.EDDA_PGLITE_TEMPLATE_CACHE);
  if (set !== undefined) return set === "0" ? undefined : set;
  const xdg = str(env.XDG_CACHE_HOME);
  if (xdg) return `${xdg}/edda-edge`;
  const home = str(env.HOME);
  return home ? `${home}/.cache/edda-edge` : undefined;
}

export function readConfig(env: EddaEnv): EddaConfig {
  const driver = str(env.DATABASE_DRIVER);
  if (driver !== undefined && driver !== "postgres-js" && driver !== "neon-serverless") {
    throw new ConfigurationError(`DATABASE_DRIVER must be "postgres-js" or "neon-serverless", got "${driver}"`, "DATABASE_DRIVER");
  }
  return {
    databaseUrl: str(env.DATABASE_URL),
    driver,
    neonWsProxy: str(env.NEON_WS_PROXY),
    secret: str(env.EDDA_SECRET),
    encryptionKeys: encryptionKeys(env),
    apiToken: token(env, "EDDA_API_TOKEN"),
    eventsToken: token(env, "EDDA_EVENTS_TOKEN"),
    eventsTokenTargeting: flag(env, "EDDA_EVENTS_TOKEN_TARGETING"),
    allowUnauthenticated: flag(env, "EDDA_ALLOW_UNAUTHENTICATED"),
    brokerUrl: str(env.EDDA_BROKER_URL),
    serviceName: str(env.EDDA_SERVICE_NAME) ?? "edda-edge",
    deployment: str(env.EDDA_DEPLOYMENT),
    sweepExpectedSeconds: num(env, "EDDA_SWEEP_EXPECTED_SECONDS"),
    cpuBudgetMs: num(env, "EDDA_CPU_BUDGET_MS"),
    publicUrl: str(env.EDDA_PUBLIC_URL),
    allowedHosts: configuredHosts(str(env.EDDA_ALLOWED_HOSTS), str(env.EDDA_PUBLIC_URL)),
    trustedProxies: trustedProxies(str(env.EDDA_TRUSTED_PROXIES)),
    maxOpenStreams: num(env, "EDDA_MAX_STREAMS"),
    bodyTimeoutSeconds: num(env, "EDDA_BODY_TIMEOUT_SECONDS"),
    maxBodyBytes: num(env, "EDDA_MAX_BODY_BYTES"),
    sweepIntervalMs: num(env, "EDDA_SWEEP_INTERVAL_MS"),
    sweepCpuMs: num(env, "EDDA_SWEEP_CPU_MS"),
    consumerCpuMs: num(env, "EDDA_CONSUMER_CPU_MS"),
    maxWakeSeconds: num(env, "EDDA_MAX_WAKE_SECONDS"),
    subrequestLimit: num(env, "EDDA_SUBREQUEST_LIMIT"),
    maxHops: num(env, "EDDA_MAX_HOPS"),
    fetchDispatcher: str(env.EDDA_DISPATCHER) === "http",
    stepConcurrency: num(env, "EDDA_STEP_CONCURRENCY"),
    leaseSeconds: num(env, "EDDA_LEASE_SECONDS"),
    handoffLeaseSeconds: num(env, "EDDA_HANDOFF_LEASE_SECONDS"),
    metrics: metricsSetting(env),
    retention: retentionDays(env),
    webhookSecrets: webhookSecrets(env),
    pgliteTemplateCache: pgliteTemplateCache(env),
  };
}

function metricsSetting(env: EddaEnv): "prometheus" | "off" | undefined {
  const v = str(env.EDDA_METRICS);
  if (v === undefined || v === "off") return v;
  if (v !== "prometheus") throw new ConfigurationError(`EDDA_METRICS must be "prometheus" or "off", got "${v}"`, "EDDA_METRICS");
  return v;
}

/**
 * Why this configuration must not serve its API (Workers, Deno: reachable from
 * the network), or null: no EDDA_API_TOKEN and no explicit opt-out.
 */
export function unauthenticatedRefusal(config: EddaConfig): ConfigurationError | null {
  if (config.apiToken || config.allowUnauthenticated) return null;
  return new ConfigurationError(
    "EDDA_API_TOKEN is not set, so anyone could start, read and cancel workflows: set EDDA_API_TOKEN, or EDDA_ALLOW_UNAUTHENTICATED=1 to serve without authentication",
    "EDDA_API_TOKEN",
  );
}

/** The app options an environment variable can supply (the adapters build the dispatcher and the sweep themselves). */
export type EnvOptions = Pick<
  EddaOptions,
  "serviceName" | "deployment" | "sweepIntervalSeconds" | "cpuBudgetMs" | "secret" | "encryptionKeys" | "apiToken" | "eventsToken" | "eventsTokenTargeting" | "brokerUrl" | "leaseSeconds" | "handoffLeaseSeconds" | "retention" | "subrequestLimit" | "allowedHosts" | "webhookSecrets" | "publicUrl" | "trustedProxies" | "maxOpenStreams" | "maxBodyBytes"
>;

/** Each option the environment supplies, from the parsed configuration. */
function envOptions(config: EddaConfig): EnvOptions {
  return {
    serviceName: config.serviceName,
    deployment: config.deployment,
    sweepIntervalSeconds: config.sweepExpectedSeconds,
    cpuBudgetMs: config.cpuBudgetMs,
    secret: config.secret,
    encryptionKeys: config.encryptionKeys,
    apiToken: config.apiToken,
    eventsToken: config.eventsToken,
    eventsTokenTargeting: config.eventsTokenTargeting,
    brokerUrl: config.brokerUrl,
    leaseSeconds: config.leaseSeconds,
    handoffLeaseSeconds: config.handoffLeaseSeconds,
    retention: config.retention,
    subrequestLimit: config.subrequestLimit,
    allowedHosts: config.allowedHosts.length ? config.allowedHosts : undefined,
    webhookSecrets: config.webhookSecrets,
    publicUrl: config.publicUrl,
    trustedProxies: config.trustedProxies.length ? config.trustedProxies : undefined,
    maxOpenStreams: config.maxOpenStreams,
    maxBodyBytes: config.maxBodyBytes,
  };
}

/**
 * The caller's options completed from the environment, the one mapping every
 * adapter (Node, Workers, Deno) uses: for each option an environment variable
 * can supply, the caller's explicit value wins (an `undefined` one counts as
 * not given); else the environment's; else `defaults` (the platform's own,
 * e.g. the Workers subrequest budget). Options no variable names pass through.
 * The result has no `undefined` values, so it spreads safely.
 */
export function withEnvironment<T extends Partial<EnvOptions>>(explicit: T, config: EddaConfig, defaults: Partial<EnvOptions> = {}): T & Partial<EnvOptions> {
  const fromEnv = envOptions(config) as Record<string, unknown>;
  const given = explicit as Record<string, unknown>;
  const fallback = defaults as Record<string, unknown>;
  const out: Record<string, unknown> = { ...explicit };
  for (const key of Object.keys(fromEnv)) {
    const value = given[key] ?? fromEnv[key] ?? fallback[key];
    if (value === undefined) delete out[key];
    else out[key] = value;
  }
  return out as T & Partial<EnvOptions>;
}
