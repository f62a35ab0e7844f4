/**
 * The configuration every platform reads from its environment, parsed in one
 * shape. Each platform adapter passes its own variables in (process.env,
 * Deno.env, Worker bindings); nothing else reads the environment.
 */
export interface EddaEnv {
  DATABASE_URL?: string;
  DATABASE_DRIVER?: string;
  NEON_WS_PROXY?: string;
  EDDA_SECRET?: string;
  EDDA_API_TOKEN?: string;
  EDDA_EVENTS_TOKEN?: string;
  EDDA_BROKER_URL?: string;
  EDDA_SERVICE_NAME?: string;
  EDDA_PUBLIC_URL?: string;
  EDDA_SWEEP_INTERVAL_MS?: string;
  EDDA_MAX_WAKE_SECONDS?: string;
  EDDA_SUBREQUEST_LIMIT?: string;
  EDDA_MAX_HOPS?: string;
  EDDA_LEASE_SECONDS?: string;
  EDDA_HANDOFF_LEASE_SECONDS?: string;
  [key: string]: unknown;
}

export interface EddaConfig {
  databaseUrl: string | undefined;
  driver: "postgres-js" | "neon-serverless";
  neonWsProxy: string | undefined;
  secret: string | undefined;
  apiToken: string | undefined;
  /** A separate bearer token accepted by CloudEvents ingestion (`POST /`, `/events`). */
  eventsToken: string | undefined;
  brokerUrl: string | undefined;
  serviceName: string;
  publicUrl: string | undefined;
  /** Interval sweeps for servers without a platform cron (ms; unset → the platform's default). */
  sweepIntervalMs: number | undefined;
  /** Long-lived servers with the http dispatcher (Node): timers due within this many seconds fire in-process. */
  maxWakeSeconds: number | undefined;
  /** Outgoing fetches per invocation (unset → the platform's default: 40 on Workers, none elsewhere). */
  subrequestLimit: number | undefined;
  /** Follow-up hops a fetch chain may take before it is left to the sweep (default 8). */
  maxHops: number | undefined;
  /** Lease of a running step (default 300 s) and of a handed-off follow-up (default 30 s): how soon a crashed step is resumed. */
  leaseSeconds: number | undefined;
  handoffLeaseSeconds: number | undefined;
}

const str = (v: unknown) => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);

function num(env: EddaEnv, name: string): number | undefined {
  const v = str(env[name]);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new TypeError(`${name} must be a number ≥ 0, got "${v}"`);
  return n;
}

export function readConfig(env: EddaEnv): EddaConfig {
  const driver = str(env.DATABASE_DRIVER) ?? "postgres-js";
  if (driver !== "postgres-js" && driver !== "neon-serverless") {
    throw new TypeError(`DATABASE_DRIVER must be "postgres-js" or "neon-serverless", got "${driver}"`);
  }
  return {
    databaseUrl: str(env.DATABASE_URL),
    driver,
    neonWsProxy: str(env.NEON_WS_PROXY),
    secret: str(env.EDDA_SECRET),
    apiToken: str(env.EDDA_API_TOKEN),
    eventsToken: str(env.EDDA_EVENTS_TOKEN),
    brokerUrl: str(env.EDDA_BROKER_URL),
    serviceName: str(env.EDDA_SERVICE_NAME) ?? "edda-edge",
    publicUrl: str(env.EDDA_PUBLIC_URL),
    sweepIntervalMs: num(env, "EDDA_SWEEP_INTERVAL_MS"),
    maxWakeSeconds: num(env, "EDDA_MAX_WAKE_SECONDS"),
    subrequestLimit: num(env, "EDDA_SUBREQUEST_LIMIT"),
    maxHops: num(env, "EDDA_MAX_HOPS"),
    leaseSeconds: num(env, "EDDA_LEASE_SECONDS"),
    handoffLeaseSeconds: num(env, "EDDA_HANDOFF_LEASE_SECONDS"),
  };
}
