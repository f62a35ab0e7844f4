// The http dispatcher's rules (engine/http-dispatcher.ts), over a fetch that
// keeps what it is sent and a runner that records what it is asked — no
// server, no database: the steps dispatched in one turn go as one signed
// request (at most 500 steps each), a step without a lease takes its hand-off
// first and one with nothing to run is not sent, and steps that cannot leave
// — past the hop bound without a queue, with the subrequest budget spent, or
// refused by the receiver — are given back (deferStep) so the sweep resumes
// them at once. Without a fetch of its own, on Node, it posts over node:http
// with a keep-alive agent (a real server here): one connection for the
// follow-ups in turn, and a reused connection the receiver dropped is sent
// again once on a fresh one. Real engines over real hops:
// test/dispatch/limits.test.ts.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { describe, expect, it, vi } from "vitest";
import { verify } from "../../src/core/signature.ts";
import { SubrequestBudget, type Dispatcher, type StepRequest, type StepRunner } from "../../src/engine/dispatcher.ts";
import { HttpDispatcher } from "../../src/engine/http-dispatcher.ts";

const SECRET = "dispatch-secret";

function rig(opts: { status?: number; maxHops?: number; continueWith?: Dispatcher; handOff?: (id: string) => { workerId: string; token: number } | null } = {}) {
  const sent: { url: string; headers: Record<string, string>; body: string }[] = [];
  const deferred: StepRequest[] = [];
  const fetch = (async (url: string, init: RequestInit) => {
    sent.push({ url, headers: init.headers as Record<string, string>, body: init.body as string });
    return new Response("{}", { status: opts.status ?? 202 });
  }) as typeof globalThis.fetch;
  const runner: StepRunner = {
    runStep: async () => undefined,
    fireDueTimers: async () => 0,
    deferStep: async (req) => void deferred.push(req),
    handOff: async (id) => (opts.handOff ? opts.handOff(id) : { workerId: "w", token: 7 }),
  };
  const d = new HttpDispatcher({ baseUrl: "https://edda.example.com/base/", secret: SECRET, fetch, ...(opts.maxHops !== undefined ? { maxHops: opts.maxHops } : {}), ...(opts.continueWith ? { continueWith: opts.continueWith } : {}) });
  d.attach(runner);
  // The request leaves at the end of the turn; its send is the scope's background work.
  const work: Promise<unknown>[] = [];
  const scope = (extra: { hop?: number; budget?: SubrequestBudget } = {}) => ({ waitUntil: (p: Promise<unknown>) => void work.push(p), ...extra });
  const settle = async () => {
    for (let i = 0; i < work.length; i++) await work[i];
  };
  return { d, sent, deferred, scope, settle };
}

const lease = (token: number) => ({ workerId: "w", token });

describe("http dispatcher", () => {
  it("one turn's steps go as one request to /_edda/step, signed over its body, with the hop after the invocation's", async () => {
    const { d, sent, scope, settle } = rig();
    const s = scope({ hop: 2 });
    d.dispatch({ instanceId: "a", lease: lease(1) }, s);
    d.dispatch({ instanceId: "b", lease: lease(2) }, s);
    await settle();
    expect(sent).toHaveLength(1);
    expect(sent[0]!.url).toBe("https://edda.example.com/_edda/step");
    expect(JSON.parse(sent[0]!.body)).toEqual({ steps: [{ instanceId: "a", lease: lease(1) }, { instanceId: "b", lease: lease(2) }], hop: 3 });
    const h = sent[0]!.headers;
    expect(await verify(SECRET, { method: "POST", path: "/_edda/step", query: "", body: sent[0]!.body }, h["x-edda-timestamp"], h["x-edda-signature"])).toBe(true);
    expect(await verify("another", { method: "POST", path: "/_edda/step", query: "", body: sent[0]!.body }, h["x-edda-timestamp"], h["x-edda-signature"])).toBe(false);
  });

  it("a lone step is sent as itself; a step without a lease takes its hand-off, and one with nothing to run is not sent", async () => {
    const { d, sent, scope, settle } = rig({ handOff: (id) => (id === "idle" ? null : lease(9)) });
    d.dispatch({ instanceId: "woken", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }, scope());
    await settle();
    expect(JSON.parse(sent[0]!.body)).toEqual({ instanceId: "woken", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", lease: lease(9), hop: 1 });
    d.dispatch({ instanceId: "idle" }, scope());
    await settle();
    expect(sent).toHaveLength(1);
  });

  it("at most 500 steps a request, one subrequest each; what the budget cannot carry is given back", async () => {
    const { d, sent, deferred, scope, settle } = rig();
    const budget = new SubrequestBudget(2);
    const s = scope({ budget });
    for (let i = 0; i < 1100; i++) d.dispatch({ instanceId: `i${i}`, lease: lease(i) }, s);
    await settle();
    expect(sent.map((r) => (JSON.parse(r.body) as { steps: unknown[] }).steps.length)).toEqual([500, 500]);
    expect(budget.remaining).toBe(0);
    expect(deferred.map((r) => r.instanceId)).toEqual(Array.from({ length: 100 }, (_, i) => `i${1000 + i}`));
  });

  it("past maxHops the chain goes on through continueWith, or is given back for the sweep", async () => {
    const queued: StepRequest[] = [];
    const queue: Dispatcher = { attach: () => undefined, dispatch: (req) => void queued.push(req) };
    const withQueue = rig({ maxHops: 3, continueWith: queue });
    withQueue.d.dispatch({ instanceId: "a", lease: lease(1) }, withQueue.scope({ hop: 3 }));
    await withQueue.settle();
    expect({ sent: withQueue.sent.length, queued: queued.map((q) => q.instanceId) }).toEqual({ sent: 0, queued: ["a"] });
    const without = rig({ maxHops: 3 });
    without.d.dispatch({ instanceId: "b", lease: lease(2) }, without.scope({ hop: 3 }));
    without.d.dispatch({ instanceId: "c", lease: lease(3) }, without.scope({ hop: 2 }));
    await without.settle();
    expect(without.deferred.map((r) => r.instanceId)).toEqual(["b"]);
    expect(without.sent.map((r) => JSON.parse(r.body) as { hop: number })).toEqual([expect.objectContaining({ instanceId: "c", hop: 3 })]);
  });

  it("a refused follow-up (non-2xx) gives its handed leases back at once", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const { d, deferred, scope, settle } = rig({ status: 503 });
      const s = scope();
      d.dispatch({ instanceId: "a", lease: lease(1) }, s);
      d.dispatch({ instanceId: "b" }, s);
      await settle();
      expect(deferred).toEqual([{ instanceId: "a", lease: lease(1) }, { instanceId: "b", lease: lease(7) }]);
      expect(String(logged.mock.calls[0]![0])).toContain("follow-up dispatch failed");
    } finally {
      logged.mockRestore();
    }
  });

  it("on Node, without a fetch of its own: node:http, keep-alive; a reused connection the receiver dropped is sent again on a fresh one", async () => {
    const received: { body: string; socket: Socket; verified: boolean }[] = [];
    let dropNext = false;
    const server = createServer((req: IncomingMessage, res) => {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (c: string) => (body += c));
      req.on("end", () => {
        if (dropNext) {
          // What a receiver closing an idle connection looks like to a sender that just reused it.
          dropNext = false;
          req.socket.destroy();
          return;
        }
        void verify(SECRET, { method: "POST", path: req.url!, query: "", body }, req.headers["x-edda-timestamp"] as string, req.headers["x-edda-signature"] as string).then((verified) => {
          received.push({ body, socket: req.socket, verified });
          res.writeHead(202, { "content-type": "application/json" }).end('{"accepted":1}');
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const deferred: StepRequest[] = [];
    const d = new HttpDispatcher({ baseUrl: `http://127.0.0.1:${port}`, secret: SECRET });
    d.attach({ runStep: async () => undefined, fireDueTimers: async () => 0, deferStep: async (req) => void deferred.push(req) });
    const work: Promise<unknown>[] = [];
    const send = async (id: string) => {
      d.dispatch({ instanceId: id, lease: lease(1) }, { waitUntil: (p: Promise<unknown>) => void work.push(p) });
      for (let i = 0; i < work.length; i++) await work[i];
    };
    try {
      await send("a");
      await send("b");
      dropNext = true;
      await send("c");
      expect(received.map((r) => [(JSON.parse(r.body) as { instanceId: string }).instanceId, r.verified])).toEqual([
        ["a", true],
        ["b", true],
        ["c", true],
      ]);
      expect(received[1]!.socket).toBe(received[0]!.socket);
      expect(received[2]!.socket).not.toBe(received[0]!.socket);
      expect(deferred).toEqual([]);
    } finally {
      await d.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
