/**
 * Neon's serverless driver over WebSockets (`Pool`): the edge-native choice on
 * Workers and Deno Deploy. Transactions run on a pooled client, so the
 * savepoint-based nesting works as on TCP.
 *
 * Transactions begin with their first statement, and COMMIT travels with a
 * step's fenced conclusion (neon-lazy-tx.ts): a step whose transaction holds
 * only its conclusion sends it alone, autocommitted.
 */
import { Pool, neonConfig, type PoolClient } from "@neondatabase/serverless";
import { drizzle } from "drizzle-orm/neon-serverless";
import { lazyTransactionPool } from "./neon-lazy-tx.ts";
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
  /**
   * Transactions begin with their first statement (default true, neon-lazy-tx.ts): BEGIN goes in that
   * statement's flight, COMMIT in the flight of the step's fenced conclusion, and a transaction holding only
   * the conclusion sends it alone, autocommitted — one round trip instead of three. false: drizzle's
   * BEGIN … COMMIT, each a round trip.
   */
  lazyTransactions?: boolean;
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
  // Nor a checked-out one's: pg emits a connection's error on its client, and the pool listens only while the
  // client is idle. Between the pool handing a new client over and its taker's listener (a microtask later),
  // the rest of the WebSocket message is still parsed: a backend terminated right after the start-up ends
  // the process there. The taker learns of it from its query's error.
  pool.on("connect", (client: PoolClient) => client.on("error", () => {}));
  const client = opts.lazyTransactions === false ? pool : lazyTransactionPool(pool);
  const db = drizzle({ client, logger: countingLogger(stats) }) as unknown as Db;
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
