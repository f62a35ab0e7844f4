/**
 * A TCP proxy in front of Postgres that adds a round-trip delay (half each
 * way, order preserved) — a Worker talking to a database a region away — and
 * counts round trips: a client→server flight that starts after the server
 * last answered (or opens the connection) is one round trip. Queries sent
 * together (a pipeline) are one flight; that is what the count rewards.
 */
import { createServer, connect, type Socket } from "node:net";
import { frontendParser, websocketFrontendParser } from "./pg-messages.ts";

/** One round trip: the connection it ran on and the frontend messages sent in it. */
export interface Flight {
  connection: number;
  messages: string[];
  /** From the flight's first byte reaching the proxy to the answer's first byte: the delay plus the server's time. */
  ms: number | null;
}

export interface LatencyProxy {
  /** `url` with host and port replaced by the proxy's. */
  url: string;
  /** Round trips since start (or the last reset). */
  roundTrips(): number;
  reset(): void;
  /** The round trips since the last reset, with their messages (most useful with one connection at a time). */
  flights(): Flight[];
  /** Connections opened since start (the id of the last one). */
  connections(): number;
  stop(): Promise<void>;
}

export interface LatencyProxyOptions {
  /** Record each round trip's messages (`flights()`): Postgres straight, or Postgres inside a WebSocket. */
  trace?: "postgres" | "websocket";
  /** Record each round trip's time (`flights()`, messages left empty) without decoding them. */
  timing?: boolean;
}

export async function startLatencyProxy(targetUrl: string, rttMs: number, opts: LatencyProxyOptions = {}): Promise<LatencyProxy> {
  const target = new URL(targetUrl);
  const oneWay = rttMs / 2;
  let trips = 0;
  let connections = 0;
  let flights: Flight[] = [];
  const sockets = new Set<Socket>();

  // Delay each chunk by `oneWay`, never reordering a direction's bytes.
  const delayed = (to: Socket) => {
    let last = 0;
    return (chunk: Buffer) => {
      const at = Math.max(Date.now() + oneWay, last);
      last = at;
      setTimeout(() => to.destroyed || to.write(chunk), at - Date.now());
    };
  };

  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname === "localhost" ? "127.0.0.1" : target.hostname);
    sockets.add(client).add(upstream);
    let awaitingAnswer = false;
    const toServer = delayed(upstream);
    const toClient = delayed(client);
    const connection = ++connections;
    const parser = opts.trace === "postgres" ? frontendParser() : opts.trace === "websocket" ? websocketFrontendParser() : null;
    let flight: Flight | null = null;
    let sentAt = 0;
    client.on("data", (chunk: Buffer) => {
      if (!awaitingAnswer) {
        trips++;
        awaitingAnswer = true;
        if (parser || opts.timing) flights.push((flight = { connection, messages: [], ms: null }));
        sentAt = performance.now();
      }
      if (parser) flight?.messages.push(...parser.push(chunk));
      toServer(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      // The proxy holds each direction for half the round trip: the first answer byte arrives here after one-way + server time.
      if (awaitingAnswer && flight && flight.ms === null) flight.ms = performance.now() - sentAt + oneWay;
      awaitingAnswer = false;
      toClient(chunk);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("close", close).on("error", close);
    upstream.on("close", close).on("error", close);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  const url = new URL(targetUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    roundTrips: () => trips,
    reset: () => {
      trips = 0;
      flights = [];
    },
    flights: () => flights,
    connections: () => connections,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
