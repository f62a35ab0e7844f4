/**
 * Neon's serverless driver over WebSockets (`Pool`): the edge-native choice on
 * Workers and Deno Deploy. Transactions run on a pooled client, so the
 * savepoint-based nesting works as on TCP.
 */
import { Pool, neonConfig } from "@neondatabase/serverless";
import { drizzle } from "drizzle-orm/neon-serverless";
import { countingLogger, type Database, type DatabaseDriver, type Db, type QueryStats } from "../database.ts";

export type { Database, DatabaseDriver, Db, DriverConnection, DriverName, QueryStats } from "../database.ts";

export interface NeonOptions {
  url: string;
  max?: number;
  /**
   * Local development: route WebSockets through a WebSocket→TCP proxy
   * (`host:port` of the proxy), without TLS, as Neon documents.
   */
  wsProxy?: string;
  /** A WebSocket constructor where the runtime has no global one (Node 20). */
  webSocketConstructor?: unknown;
  /**
   * Send the start-up and the cleartext password in one flight instead of
   * waiting for the server to ask (the driver's default, `"password"`, is
   * right for Neon, whose proxy asks for a cleartext password over TLS). Off
   * by default through `wsProxy`: a local Postgres asks for SCRAM or nothing.
   */
  pipelineConnect?: "password" | false;
}

export function createNeonDatabase(opts: NeonOptions): Database {
  if (opts.webSocketConstructor) neonConfig.webSocketConstructor = opts.webSocketConstructor as typeof WebSocket;
  if (opts.wsProxy) {
    const proxy = opts.wsProxy;
    neonConfig.wsProxy = (host, port) => `${proxy}/v1?address=${host}:${port}`;
    neonConfig.useSecureWebSocket = false;
    neonConfig.pipelineTLS = false;
    neonConfig.pipelineConnect = opts.pipelineConnect ?? false;
  } else if (opts.pipelineConnect !== undefined) {
    neonConfig.pipelineConnect = opts.pipelineConnect;
  }
  const stats: QueryStats = { statements: 0 };
  const pool = new Pool({ connectionString: opts.url, max: opts.max ?? 10 });
  // An idle client's socket closing must not crash the process.
  pool.on("error", () => {});
  const db = drizzle({ client: pool, logger: countingLogger(stats) }) as unknown as Db;
  return {
    driver: "neon-serverless",
    db,
    stats,
    concurrent: true,
    // A pooled client held for the listen (one WebSocket), given back when it ends.
    listen: async (channel, onPayload) => {
      const client = await pool.connect();
      const quoted = `"${channel.replace(/"/g, '""')}"`;
      client.on("notification", (n) => {
        if (n.channel === channel) onPayload(n.payload ?? "");
      });
      try {
        await client.query(`LISTEN ${quoted}`);
      } catch (err) {
        client.release(true);
        throw err;
      }
      return async () => {
        await client.query(`UNLISTEN ${quoted}`).catch(() => undefined);
        client.release();
      };
    },
    close: () => pool.end(),
  };
}

/**
 * Neon's driver for the edge adapters, e.g. `createWorker({ workflows,
 * driver: neonServerless })`: a Worker bundles Neon's driver only when its
 * entry imports this. NEON_WS_PROXY routes it through a local proxy.
 */
export const neonServerless: DatabaseDriver = {
  name: "neon-serverless",
  open: ({ url, max, wsProxy }) => createNeonDatabase({ url, max, ...(wsProxy ? { wsProxy } : {}) }),
};
