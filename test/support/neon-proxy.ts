// Local WebSocket→TCP proxy so the Neon serverless driver can reach a plain
// Postgres, as the driver documents for non-Neon databases (neonConfig.wsProxy,
// the role neondatabase/wsproxy plays in production). Each WebSocket carries one
// Postgres connection: `ws://127.0.0.1:<port>/v1?address=host:port`.
import { connect, type Socket } from "node:net";
import type { NeonConfig } from "@neondatabase/serverless";
import WebSocket, { WebSocketServer } from "ws";

export interface NeonWsProxy {
  port: number;
  /** Postgres connections forwarded so far. */
  readonly connections: number;
  stop(): Promise<void>;
}

const LOCAL_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"];

/** Starts the proxy on a free 127.0.0.1 port. Only forwards to `allowedHosts`. */
export async function startNeonWsProxy(allowedHosts: string[] = LOCAL_HOSTS): Promise<NeonWsProxy> {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise<void>((resolve, reject) => {
    wss.once("listening", resolve);
    wss.once("error", reject);
  });
  const sockets = new Set<Socket>();
  let connections = 0;

  wss.on("connection", (ws, req) => {
    const address = new URL(req.url ?? "/", "http://proxy").searchParams.get("address") ?? "";
    const colon = address.lastIndexOf(":");
    const host = address.slice(0, colon);
    const port = Number(address.slice(colon + 1));
    if (colon < 1 || !Number.isInteger(port) || port <= 0 || !allowedHosts.includes(host)) {
      ws.close(1008, `target not allowed: ${address}`);
      return;
    }
    const socket = connect({ host: host.replace(/^\[(.*)\]$/, "$1"), port });
    connections++;
    sockets.add(socket);
    socket.setNoDelay(true);
    // Writes before 'connect' are buffered by net.Socket, so no queue is needed.
    ws.on("message", (data: Buffer) => socket.write(data));
    socket.on("data", (chunk) => ws.send(chunk, { binary: true }));
    const closeWs = () => {
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close();
    };
    socket.on("close", () => {
      sockets.delete(socket);
      closeWs();
    });
    socket.on("error", closeWs);
    ws.on("close", () => socket.destroy());
    ws.on("error", () => socket.destroy());
  });

  const addr = wss.address();
  if (addr === null || typeof addr !== "object") throw new Error("neon proxy: no address");
  return {
    port: addr.port,
    get connections() {
      return connections;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        for (const c of wss.clients) c.terminate();
        wss.close(() => resolve());
      }),
  };
}

type ProxySettings = Pick<
  NeonConfig,
  "wsProxy" | "useSecureWebSocket" | "pipelineTLS" | "pipelineConnect" | "forceDisablePgSSL" | "webSocketConstructor"
>;

/**
 * Points a Neon config (the global `neonConfig` class, or a Client's
 * `client.neonConfig`) at the local proxy: plain ws://, no TLS, no password
 * pipelining (the test server uses trust auth), and the `ws` package as
 * WebSocket (Node 20 has no global one; Node-only helper).
 */
export function configureNeonForLocalProxy(config: ProxySettings, proxyPort: number): void {
  config.wsProxy = (host, port) => `127.0.0.1:${proxyPort}/v1?address=${host}:${port}`;
  config.useSecureWebSocket = false;
  config.pipelineTLS = false;
  config.pipelineConnect = false;
  config.forceDisablePgSSL = true;
  config.webSocketConstructor = WebSocket as unknown as NeonConfig["webSocketConstructor"];
}
