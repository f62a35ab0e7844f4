/**
 * Cloudflare Workers adapter: `createWorker({ workflows })` is the module
 * worker — `fetch` serves the app, `scheduled` (the cron trigger) sweeps.
 *
 * Database clients live for one request (Workers forbid sharing I/O objects
 * across requests): each invocation opens one (postgres.js over TCP with
 * `nodejs_compat`, through Hyperdrive when bound, or Neon's WebSocket driver)
 * and closes it in `ctx.waitUntil` once its background work is done. Nothing
 * is migrated here; run `edda-edge migrate` against the deployed database.
 *
 * Follow-up steps are signed requests to this same worker, sent inside
 * `ctx.waitUntil`, through the first of: a `SELF` service binding,
 * EDDA_PUBLIC_URL, the loopback `ctx.exports.default` (default since the
 * 2025-11-17 compatibility date), or a plain fetch to the request's own origin.
 */
import { createEdda, type Edda, type EddaOptions } from "../edda.ts";
import { HttpDispatcher } from "../engine/http-dispatcher.ts";
import { readConfig, type EddaEnv } from "./env.ts";
import { ConfigurationError, openServerlessDatabase } from "./serverless.ts";

/** The parts of the Workers runtime types this adapter uses (no @cloudflare/workers-types). */
export interface Fetcher {
  fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response>;
}
export interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
  readonly exports?: { default?: Fetcher };
}
export interface ScheduledController {
  readonly cron: string;
  readonly scheduledTime: number;
}
export interface WorkerEnv extends EddaEnv {
  /** Optional Hyperdrive binding: its connection string replaces DATABASE_URL. */
  HYPERDRIVE?: { connectionString: string };
  /** Optional service binding to this worker itself, for follow-ups. */
  SELF?: Fetcher;
}

export type WorkerOptions = Omit<EddaOptions, "database" | "dispatcher" | "secret" | "apiToken" | "brokerUrl" | "autoMigrate">;

export interface EddaWorker {
  fetch(request: Request, env: WorkerEnv, ctx: ExecutionContext): Promise<Response>;
  scheduled(controller: ScheduledController, env: WorkerEnv, ctx: ExecutionContext): Promise<void>;
}

export function createWorker(opts: WorkerOptions): EddaWorker {
  // One Edda per invocation: it is cheap (routes compile lazily) and its dispatcher may use this invocation's loopback.
  function eddaFor(env: WorkerEnv, ctx: ExecutionContext, origin: string | null): Edda {
    const config = readConfig(env);
    if (!config.secret) throw new ConfigurationError("EDDA_SECRET is not set (it signs follow-up requests)");
    const self = env.SELF ?? (config.publicUrl ? undefined : ctx.exports?.default);
    const baseUrl = config.publicUrl ?? origin ?? "https://edda.internal";
    if (!self && !config.publicUrl && !origin) console.warn("edda: no EDDA_PUBLIC_URL, SELF binding or ctx.exports loopback: cron follow-ups cannot be sent");
    const dispatcher = new HttpDispatcher({
      baseUrl,
      secret: config.secret,
      ...(self ? { fetch: (input, init) => self.fetch(input, init) } : {}),
      ...(config.maxWakeSeconds !== undefined ? { maxWakeSeconds: config.maxWakeSeconds } : {}),
    });
    return createEdda({
      serviceName: config.serviceName,
      ...opts,
      database: () => openServerlessDatabase(config, { ...(env.HYPERDRIVE ? { connectionString: env.HYPERDRIVE.connectionString } : {}), max: 5 }),
      secret: config.secret,
      ...(config.apiToken ? { apiToken: config.apiToken } : {}),
      ...(config.eventsToken ? { eventsToken: config.eventsToken } : {}),
      ...(config.brokerUrl ? { brokerUrl: config.brokerUrl } : {}),
      dispatcher,
    });
  }

  return {
    async fetch(request, env, ctx) {
      let edda: Edda;
      try {
        edda = eddaFor(env, ctx, new URL(request.url).origin);
      } catch (err) {
        return Response.json({ error: (err as Error).message, error_type: "ConfigurationError" }, { status: 500 });
      }
      return edda.fetch(request, env, ctx);
    },
    async scheduled(controller, env, ctx) {
      const report = await eddaFor(env, ctx, null).sweep({}, ctx);
      console.log(`edda: sweep (${controller.cron})`, JSON.stringify(report));
    },
  };
}
