/**
 * Deno adapter (Deno Deploy and `deno run`): `serveDeno({ workflows })` serves
 * the app with `Deno.serve` (port from PORT) and sweeps with `Deno.cron` where
 * the runtime has it (Deno Deploy, `--unstable-cron`), else — and whenever
 * EDDA_SWEEP_INTERVAL_MS is set — on an interval (local runs).
 *
 * Deno isolates keep connections between requests, so one pooled client
 * (postgres.js or Neon's driver) serves every request. Follow-ups are signed
 * requests to EDDA_PUBLIC_URL (set it on Deno Deploy), by default this
 * server's own address. Nothing is migrated here: run `edda-edge migrate`.
 */
import { createEdda, type Edda, type EddaOptions } from "../edda.ts";
import { HttpDispatcher } from "../engine/http-dispatcher.ts";
import type { Database } from "../storage/database.ts";
import { readConfig, type EddaConfig } from "./env.ts";
import { ConfigurationError, openServerlessDatabase } from "./serverless.ts";

/** The parts of the `Deno` namespace this adapter uses (declared here; tsc has no Deno types). */
interface DenoRuntime {
  env: { toObject(): Record<string, string> };
  serve(
    options: { port?: number; hostname?: string; onListen?: (addr: { hostname: string; port: number }) => void },
    handler: (request: Request) => Response | Promise<Response>,
  ): { addr: { hostname: string; port: number }; shutdown(): Promise<void> };
  cron?(name: string, schedule: string, handler: () => Promise<void>): Promise<void>;
}

export type DenoServeOptions = Omit<EddaOptions, "database" | "dispatcher" | "secret" | "apiToken" | "brokerUrl" | "autoMigrate"> & {
  /** Default: Deno.env. */
  env?: Record<string, string | undefined>;
  /** Default 127.0.0.1 (Deno Deploy ignores it). */
  hostname?: string;
  /** Cron schedule of the sweep where Deno.cron exists (default every minute). */
  cronSchedule?: string;
};

export interface DenoServer {
  edda: Edda;
  url: string;
  config: EddaConfig;
  database: Database;
  close(): Promise<void>;
}

export function serveDeno(opts: DenoServeOptions): DenoServer {
  const Deno = (globalThis as unknown as { Deno: DenoRuntime }).Deno;
  const { env: envOption, hostname, cronSchedule, ...eddaOptions } = opts;
  const config = readConfig(envOption ?? Deno.env.toObject());
  if (!config.secret) throw new ConfigurationError("EDDA_SECRET is not set (it signs follow-up requests)");
  const database = openServerlessDatabase(config, { max: 10 });

  let edda: Edda | null = null;
  const port = Number((envOption ?? Deno.env.toObject()).PORT ?? 8000);
  const server = Deno.serve({ port, hostname: hostname ?? "127.0.0.1", onListen: () => {} }, (req) => edda!.fetch(req));
  const url = `http://${server.addr.hostname}:${server.addr.port}`;
  edda = createEdda({
    serviceName: config.serviceName,
    ...eddaOptions,
    database,
    secret: config.secret,
    ...(config.apiToken ? { apiToken: config.apiToken } : {}),
    ...(config.eventsToken ? { eventsToken: config.eventsToken } : {}),
    ...(config.brokerUrl ? { brokerUrl: config.brokerUrl } : {}),
    ...(config.subrequestLimit !== undefined ? { subrequestLimit: config.subrequestLimit } : {}),
    dispatcher: new HttpDispatcher({
      baseUrl: config.publicUrl ?? url,
      secret: config.secret,
      ...(config.maxHops !== undefined ? { maxHops: config.maxHops } : {}),
    }),
  });

  let sweeping: Promise<unknown> | null = null;
  const sweep = async () => {
    if (sweeping) return;
    sweeping = edda!.sweep().catch((err: unknown) => console.error("edda: sweep failed", err));
    await sweeping;
    sweeping = null;
  };
  if (typeof Deno.cron === "function") void Deno.cron("edda-sweep", cronSchedule ?? "* * * * *", sweep);
  const interval = typeof Deno.cron !== "function" || config.sweepIntervalMs !== undefined ? setInterval(() => void sweep(), config.sweepIntervalMs ?? 5000) : null;

  return {
    edda,
    url,
    config,
    database,
    async close() {
      if (interval) clearInterval(interval);
      await server.shutdown();
      await sweeping;
      await edda!.close();
      await database.close();
    },
  };
}
