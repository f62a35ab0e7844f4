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
  EDDA_BROKER_URL?: string;
  EDDA_SERVICE_NAME?: string;
  EDDA_PUBLIC_URL?: string;
  [key: string]: unknown;
}

export interface EddaConfig {
  databaseUrl: string | undefined;
  driver: "postgres-js" | "neon-serverless";
  neonWsProxy: string | undefined;
  secret: string | undefined;
  apiToken: string | undefined;
  brokerUrl: string | undefined;
  serviceName: string;
  publicUrl: string | undefined;
}

const str = (v: unknown) => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);

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
    brokerUrl: str(env.EDDA_BROKER_URL),
    serviceName: str(env.EDDA_SERVICE_NAME) ?? "edda-edge",
    publicUrl: str(env.EDDA_PUBLIC_URL),
  };
}
