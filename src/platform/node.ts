/**
 * Node adapter: `@hono/node-server`, an interval sweeper, the viewer at /ui
 * (unless `viewer: false`), and the embedded default — PGlite with its data
 * in a local folder when DATABASE_URL is unset (migrated on start; PGlite is
 * an optional peer dependency, loaded only then), postgres.js or Neon's
 * driver otherwise.
 */
import { mkdirSync } from "node:fs";
import { serve, type ServerType } from "@hono/node-server";
import { createEdda, type Edda, type EddaOptions } from "../edda.ts";
import type { Database } from "../storage/database.ts";
import { createPostgresJsDatabase } from "../storage/drivers/postgres-js.ts";
import { createNeonDatabase } from "../storage/drivers/neon-serverless.ts";
import { migrate } from "../storage/migrate.ts";
import { viewer } from "../http/ui/surface.ts";
import { ConfigurationError, readConfig, withEnvironment, type EddaConfig } from "./env.ts";
import { prometheusMetrics } from "./metrics.ts";

export type { EddaConfig, EddaEnv } from "./env.ts";

export interface NodeServeOptions extends Omit<EddaOptions, "database"> {
  port?: number;
  hostname?: string;
  /** Folder for the embedded PGlite data (default ./.data/pglite). */
  dataDir?: string;
  /** Sweep interval (default EDDA_SWEEP_INTERVAL_MS, else 5 s); 0 disables it. */
  sweepIntervalMs?: number;
  /** How long a request's headers and body may take to arrive (default EDDA_BODY_TIMEOUT_SECONDS, else 30 s; 0: Node's own 300 s). */
  bodyTimeoutSeconds?: number;
  /** Migrate a DATABASE_URL database on start too (the embedded one always is; deployed ones use `edda-edge migrate`). */
  autoMigrate?: boolean;
  /**
   * Serve OpenTelemetry metrics at GET /metrics in the Prometheus text format
   * (default: EDDA_METRICS=prometheus). `"unless-off"`: on unless EDDA_METRICS=off
   * (`npm start`'s dev server). Needs @opentelemetry/sdk-metrics and
   * @opentelemetry/exporter-prometheus; records to a provider of its own, so
   * leave `metrics` unset.
   */
  prometheus?: boolean | "unless-off";
  env?: Record<string, string | undefined>;
}

export interface NodeServer {
  edda: Edda;
  server: ServerType;
  port: number;
  database: Database;
  config: EddaConfig;
  close(): Promise<void>;
}

export async function openNodeDatabase(config: EddaConfig, dataDir: string): Promise<Database> {
  if (!config.databaseUrl) {
    mkdirSync(dataDir, { recursive: true });
    // Loaded on demand: PGlite is an optional peer dependency, needed only for the embedded database.
    const { createPgliteDatabase } = await import("../storage/drivers/pglite.ts").catch((err: unknown) => {
      throw new Error("DATABASE_URL is not set and the embedded database needs @electric-sql/pglite: npm install @electric-sql/pglite", { cause: err });
    });
    // A fresh folder copies the machine's pre-initialised template instead of running initdb (pglite-template.ts).
    return createPgliteDatabase({ dataDir, templateCache: config.pgliteTemplateCache });
  }
  if (config.driver === "neon-serverless") {
    const { default: ws } = await import("ws");
    return createNeonDatabase({ url: config.databaseUrl, webSocketConstructor: ws, ...(config.neonWsProxy ? { wsProxy: config.neonWsProxy } : {}) });
  }
  return createPostgresJsDatabase({ url: config.databaseUrl });
}

export async function serveNode(opts: NodeServeOptions): Promise<NodeServer> {
  const env = opts.env ?? process.env;
  const config = readConfig(env);
  const database = await openNodeDatabase(config, opts.dataDir ?? ".data/pglite");
  // Embedded and development databases migrate on start; deployed ones use `npm run migrate`.
  if (!config.databaseUrl || opts.autoMigrate) await migrate(database.db);
  const port = opts.port ?? Number(env.PORT ?? 8787);
  const publicUrl = config.publicUrl ?? `http://127.0.0.1:${port}`;
  const hostname = opts.hostname ?? "127.0.0.1";
  const loopback = /^(127\.\d+\.\d+\.\d+|localhost|::1|\[::1\])$/.test(hostname);
  // Explicit options win over the environment (env.ts withEnvironment), as on every platform.
  const { autoMigrate: _migrated, bodyTimeoutSeconds: _bodyTimeout, ...rest } = opts;
  // This server sweeps every sweepIntervalMs (0: not here; then the cadence is unknown unless configured).
  const sweepMs = opts.sweepIntervalMs ?? config.sweepIntervalMs ?? 5000;
  const options = withEnvironment(rest, config, sweepMs > 0 ? { sweepIntervalSeconds: sweepMs / 1000 } : {});
  if (!options.apiToken) {
    // Secure by default: an open API only on the loopback interface, unless explicitly allowed.
    if (!loopback && !config.allowUnauthenticated) {
      throw new ConfigurationError(`refusing to serve an unauthenticated API on ${hostname}: set EDDA_API_TOKEN, or EDDA_ALLOW_UNAUTHENTICATED=1`, "EDDA_API_TOKEN");
    }
    console.warn(`edda: the API is unauthenticated (no EDDA_API_TOKEN)${loopback ? `; listening on ${hostname} only` : ""}`);
  }
  // The Host values served (guards.ts): the configured ones and, on a loopback interface once the port is bound, its loopback addresses.
  const hosts = [...(options.allowedHosts ?? [])];
  const metricsOn = opts.prometheus === "unless-off" ? config.metrics !== "off" : (opts.prometheus ?? config.metrics === "prometheus");
  const prometheus = metricsOn ? await prometheusMetrics() : null;
  if (prometheus && opts.metrics) throw new ConfigurationError("pass either metrics (your own MeterProvider) or prometheus (GET /metrics), not both", "EDDA_METRICS");
  const edda = createEdda({
    ...options,
    // Per-wait webhook URLs (createWebhook) are absolute: EDDA_PUBLIC_URL, else this server's own address.
    publicUrl,
    ...(prometheus ? { metrics: prometheus.api, metricsText: () => prometheus.text() } : {}),
    allowedHosts: hosts,
    // The viewer is on where a developer runs the app (npm start, edda-edge dev, a Node server); a Worker opts in.
    viewer: opts.viewer ?? viewer(),
    database,
    dispatcher:
      opts.dispatcher ??
      (config.fetchDispatcher
        ? { http: { baseUrl: publicUrl, ...(config.maxHops !== undefined ? { maxHops: config.maxHops } : {}), ...(config.maxWakeSeconds !== undefined ? { maxWakeSeconds: config.maxWakeSeconds } : {}) } }
        : config.stepConcurrency !== undefined
          ? { local: { concurrency: config.stepConcurrency } }
          : "local"),
  });
  // A request whose headers and body have not arrived within this bound is answered 408 and closed, so
  // connections that drip a byte a second cannot pile up for Node's default 300 s (EDDA_BODY_TIMEOUT_SECONDS).
  // Node looks for late requests every connectionsCheckingInterval (30 s by default): a quarter of the bound here.
  const bodyTimeoutMs = (opts.bodyTimeoutSeconds ?? config.bodyTimeoutSeconds ?? 30) * 1000;
  const serverOptions = bodyTimeoutMs > 0
    ? { requestTimeout: bodyTimeoutMs, headersTimeout: Math.min(60_000, bodyTimeoutMs), connectionsCheckingInterval: Math.max(250, Math.min(5000, bodyTimeoutMs / 4)) }
    : {};
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve({ fetch: edda.app.fetch, port, hostname, serverOptions }, () => resolve(s));
    s.once("error", (err: NodeJS.ErrnoException) => reject(err));
  }).catch(async (err: NodeJS.ErrnoException) => {
    // Nothing is left open behind a failed listen; a taken port says what to do instead of a stack.
    await edda.close().catch(() => undefined);
    await database.close().catch(() => undefined);
    await prometheus?.shutdown().catch(() => undefined);
    if (err.code === "EADDRINUSE") {
      const taken = new ConfigurationError(`port ${port} is in use on ${hostname}; set PORT (or the port option) to another one`, "PORT");
      // What Node prints for an uncaught error is its stack: for a taken port the frames (inside this library) say nothing.
      taken.stack = `${taken.name}: ${taken.message}`;
      throw taken;
    }
    throw err;
  });
  const address = server.address();
  const boundPort = typeof address === "object" && address ? address.port : port;
  if (loopback) hosts.push(`127.0.0.1:${boundPort}`, `localhost:${boundPort}`, `[::1]:${boundPort}`);

  // The sweep in flight, awaited by close() so it never runs on a closed database.
  let sweeping: Promise<unknown> | null = null;
  const sweepEvery = sweepMs;
  const interval = sweepEvery > 0
    ? setInterval(() => {
        if (sweeping) return;
        sweeping = edda
          .sweep()
          .catch((err: unknown) => console.error("edda: sweep failed", err))
          .finally(() => (sweeping = null));
      }, sweepEvery)
    : null;
  interval?.unref();

  return {
    edda,
    server,
    port: boundPort,
    database,
    config,
    async close() {
      if (interval) clearInterval(interval);
      await sweeping;
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await edda.close();
      await database.close();
      await prometheus?.shutdown();
    },
  };
}
