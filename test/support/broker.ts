// A real HTTP CloudEvents receiver on 127.0.0.1 for outbox tests: it answers
// by the event type's prefix — ok.* → 200, bad.* → 400, down.* → 500,
// flaky.* → 500 the first time an id arrives, 200 after — and records
// every request it got. While `outage` is set, it answers 503 to everything;
// while `refusing` is set, 422 (a broker that rejects the event).
import { createServer, type IncomingHttpHeaders } from "node:http";

export interface ReceivedRequest {
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
  status: number;
}

export interface TestBroker {
  url: string;
  received: ReceivedRequest[];
  /** While true, every request is answered 503 (a broker outage). */
  outage: boolean;
  /** While true, every request is answered 422 (the broker refuses the event). */
  refusing: boolean;
  /** Requests for one event id. */
  deliveries(id: string): ReceivedRequest[];
  stop(): Promise<void>;
}

export async function startTestBroker(): Promise<TestBroker> {
  const received: ReceivedRequest[] = [];
  const seen = new Set<string>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      } catch {
        // recorded as {}; answered 400 below
      }
      const type = String(body.type ?? "");
      const id = String(body.id ?? "");
      let status = 400;
      if (broker.outage) status = 503;
      else if (broker.refusing) status = 422;
      else if (type.startsWith("ok.")) status = 200;
      else if (type.startsWith("down.")) status = 500;
      else if (type.startsWith("flaky.")) status = seen.has(id) ? 200 : 500;
      if (status !== 503 && status !== 422) seen.add(id);
      received.push({ headers: req.headers, body, status });
      res.writeHead(status, { "content-type": "text/plain" }).end(status === 200 ? "ok" : `status ${status}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const broker: TestBroker = {
    url: `http://127.0.0.1:${port}/events`,
    received,
    outage: false,
    refusing: false,
    deliveries: (id) => received.filter((r) => r.body.id === id),
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return broker;
}
