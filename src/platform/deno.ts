/**
 * Deno adapter (Deno Deploy and `deno run`). The entry (functions/deno.ts)
 * builds the app with `createDenoApp`, registers `Deno.cron` and the KV queue
 * listener at its top level — Deno Deploy only picks up cron jobs registered
 * there, before any server starts — then calls `serve()`. `serveDeno` does all
 * of it in one call for local use.
 *
 * Deno isolates keep connections between requests, so one pooled client
 * (postgres.js or Neon's driver) serves every request. Follow-ups go through
 * a Deno KV queue when one is open (Deno Deploy; `--unstable-kv` or
 * `"unstable": ["kv"]` locally): each step is a message delivered to
 * `listenQueue`, short timers are delayed messages. Without KV they are
 * signed requests to EDDA_PUBLIC_URL (default: this server's own address),
 * bounded by EDDA_MAX_HOPS and left to the sweep beyond. Nothing is migrated
 * here: run `edda-edge migrate`.
 */
import { createEdda, runInvocation, type Edda, type EddaOptions } from "../edda.ts";
import type { Dispatcher } from "../engine/dispatcher.ts";
import { HttpDispatcher } from "../engine/http-dispatcher.ts";
import { QueueDispatcher, runFollowUp, type FollowUpQueue } from "../engine/queue-dispatcher.ts";
import type { Database, DatabaseDriver } from "../storage/database.ts";
import { neonServerless } from "../storage/drivers/neon-serverless.ts";
import { postgresJs } from "../storage/drivers/postgres-js.ts";
import { configurationProblem } from "../http/problem.ts";
import { viewer } from "../http/ui/surface.ts";
import { readConfig, unauthenticatedRefusal, withEnvironment, type EddaConfig } from "./env.ts";
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

/** The parts of `Deno.Kv` used for follow-ups. */
export type { EddaConfig, EddaEnv } from "./env.ts";

export interface DenoKv {
  enqueue(value: unknown, options?: { delay?: number }): Promise<unknown>;
  listenQueue(handler: (value: unknown) => Promise<void> | void): Promise<void>;
  close(): void;
}

export type DenoServeOptions = Omit<EddaOptions, "database" | "dispatcher" | "secret" | "apiToken" | "brokerUrl"> & {
  /** Default: Deno.env. */
  env?: Record<string, string | undefined>;
  /** Default 127.0.0.1 (Deno Deploy ignores it). */
  hostname?: string;
  /** Cron schedule of the sweep where Deno.cron exists (default every minute; serveDeno only). */
  cronSchedule?: string;
  /** A Deno KV database whose queue carries follow-ups (`await Deno.openKv()`); without it, signed fetches. */
  kv?: DenoKv;
  /** The driver(s) DATABASE_DRIVER may name (default both: `postgresJs`, the default, and `neonServerless`). */
  driver?: DatabaseDriver | readonly DatabaseDriver[];
};

export interface DenoApp {
  edda: Edda;
  config: EddaConfig;
  database: Database;
  /** Follow-up transport in use. */
  transport: "kv-queue" | "fetch";
  /** One sweep (never two at once); for `Deno.cron` and the interval. */
  sweep(): Promise<void>;
  /** The `listenQueue` handler: runs one follow-up message. Throws to have KV redeliver it. */
  runQueued(message: unknown): Promise<void>;
  /** Start `Deno.serve` (and the interval sweep when EDDA_SWEEP_INTERVAL_MS is set). */
  serve(): DenoServer;
}

export interface DenoServer {
  edda: Edda;
  url: string;
  config: EddaConfig;
  database: Database;
  close(): Promise<void>;
}

/** Deno KV queues accept delays up to 30 days. */
const KV_MAX_DELAY_SECONDS = 30 * 24 * 3600;

export function createDenoApp(opts: DenoServeOptions): DenoApp {
  const Deno = (globalThis as unknown as { Deno: DenoRuntime }).Deno;
  const { env: envOption, hostname, cronSchedule: _schedule, kv, driver, ...eddaOptions } = opts;
  const env = envOption ?? Deno.env.toObject();
  const config = readConfig(env);
  // Explicit options win over the environment (env.ts withEnvironment), as on every platform.
  // Deno Deploy names each deployment (DENO_DEPLOYMENT_ID): it names this one when EDDA_DEPLOYMENT is unset.
  const denoDeployment = env.DENO_DEPLOYMENT_ID;
  // Sweeps run from Deno.cron (every minute by default) or on EDDA_SWEEP_INTERVAL_MS.
  const sweepIntervalSeconds = config.sweepIntervalMs !== undefined && config.sweepIntervalMs > 0 ? config.sweepIntervalMs / 1000 : 60;
  const options = withEnvironment(eddaOptions, config, { sweepIntervalSeconds, ...(denoDeployment ? { deployment: denoDeployment } : {}) });
  const { secret } = options;
  if (!secret) throw new ConfigurationError("EDDA_SECRET is not set (it signs follow-up requests)", "EDDA_SECRET");
  // Secure by default: without a token (or EDDA_ALLOW_UNAUTHENTICATED=1) the server answers every request 503.
  const refusal = unauthenticatedRefusal(config);
  if (refusal) console.error(`edda: refusing to serve the API: ${refusal.message}`);
  const database = openServerlessDatabase(config, [driver ?? [postgresJs, neonServerless]].flat(), { max: 10 });
  const host = hostname ?? "127.0.0.1";
  const port = Number(env.PORT ?? 8000);

  const dispatcher: Dispatcher = kv
    ? new QueueDispatcher(denoKvQueue(kv))
    : new HttpDispatcher({ baseUrl: config.publicUrl ?? `http://${host}:${port}`, secret, ...(config.maxHops !== undefined ? { maxHops: config.maxHops } : {}) });
  // The viewer is on as on Node (Deno has no bundle to keep small); `viewer: false` turns it off.
  const edda = createEdda({ ...options, viewer: opts.viewer ?? viewer(), database, secret, dispatcher });

  let sweeping: Promise<unknown> | null = null;
  const sweep = async () => {
    if (sweeping) return;
    sweeping = edda.sweep().catch((err: unknown) => console.error("edda: sweep failed", err));
    await sweeping;
    sweeping = null;
  };

  const runQueued = async (message: unknown) => {
    const outcome = await runInvocation(edda, (engine, scope) => runFollowUp(engine, message, scope));
    // Early for its timer: send it again with the remaining delay (KV has no per-message retry delay).
    if (!outcome.ack && kv) await kv.enqueue(message, { delay: outcome.retryInSeconds * 1000 });
  };

  return {
    edda,
    config,
    database,
    transport: kv ? "kv-queue" : "fetch",
    sweep,
    runQueued,
    serve() {
      const server = Deno.serve({ port, hostname: host, onListen: () => {} }, (req) => (refusal ? configurationProblem(refusal, new URL(req.url).pathname) : edda.fetch(req)));
      const interval = config.sweepIntervalMs !== undefined ? setInterval(() => void sweep(), config.sweepIntervalMs) : null;
      return {
        edda,
        url: `http://${server.addr.hostname}:${server.addr.port}`,
        config,
        database,
        async close() {
          if (interval) clearInterval(interval);
          await server.shutdown();
          await sweeping;
          await edda.close();
          kv?.close();
          await database.close();
        },
      };
    },
  };
}

/**
 * Build, schedule and serve in one call (local runs): the sweep on `Deno.cron`
 * where it exists, else on an interval (EDDA_SWEEP_INTERVAL_MS, default 5 s).
 * Deno Deploy needs the cron at the entry's top level: use `createDenoApp` there.
 */
export function serveDeno(opts: DenoServeOptions): DenoServer {
  const Deno = (globalThis as unknown as { Deno: DenoRuntime }).Deno;
  const app = createDenoApp(opts);
  if (typeof Deno.cron === "function") void Deno.cron("edda-sweep", opts.cronSchedule ?? "* * * * *", app.sweep);
  if (opts.kv) void opts.kv.listenQueue(app.runQueued);
  const server = app.serve();
  const interval = typeof Deno.cron !== "function" && app.config.sweepIntervalMs === undefined ? setInterval(() => void app.sweep(), 5000) : null;
  return {
    ...server,
    async close() {
      if (interval) clearInterval(interval);
      await server.close();
    },
  };
}

function denoKvQueue(kv: DenoKv): FollowUpQueue {
  return {
    maxBatch: 100,
    maxDelaySeconds: KV_MAX_DELAY_SECONDS,
    async send(messages) {
      await Promise.all(messages.map((m) => kv.enqueue(m.body, m.delaySeconds ? { delay: m.delaySeconds * 1000 } : {})));
    },
  };
}
