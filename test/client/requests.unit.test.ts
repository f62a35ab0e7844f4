// What the typed client sends and how it reads the answers, over a fetch
// that records each request and answers from a script — no app, no
// database: the token and extra headers, ids and names URL-encoded, a start
// wrapped as {input, instanceId, priority}, list filters as the query the API
// documents (status as a comma list, repeated tag=key:value, ISO dates), a
// CloudEvent in structured mode; get() of an unknown instance is null;
// result() asks in chunks of at most 25 s until the instance has finished,
// and reports ResultTimeoutError with the last status at its deadline.
import { describe, expect, it } from "vitest";
import { createClient, ResultTimeoutError } from "../../src/client/index.ts";

type Sent = { method: string; url: string; headers: Record<string, string>; body: unknown };
function scripted(answers: ((req: Sent) => Response)[] = []) {
  const sent: Sent[] = [];
  const fetch = async (url: string, init: RequestInit) => {
    const req = { method: init.method ?? "GET", url, headers: init.headers as Record<string, string>, body: init.body === undefined ? undefined : JSON.parse(init.body as string) };
    sent.push(req);
    const next = answers.shift();
    return next ? next(req) : Response.json({ instanceId: "i-1", status: "running", instances: [], nextCursor: null }, { status: 201 });
  };
  return { sent, client: createClient({ baseUrl: "https://edda.example.com/base/", token: "tok", headers: { "x-team": "ops" }, fetch }) };
}

describe("client requests", () => {
  it("a start: the body wrapped, the name encoded, the token and extra headers sent; 201 means created", async () => {
    const { sent, client } = scripted();
    const run = await client.start("order saga/v2", { orderId: "o-1" }, { instanceId: "o#1", priority: 5 });
    expect(run).toMatchObject({ instanceId: "i-1", status: "running", created: true });
    expect(sent[0]).toEqual({
      method: "POST",
      url: "https://edda.example.com/base/workflows/order%20saga%2Fv2/instances",
      headers: { accept: "application/json", "x-team": "ops", authorization: "Bearer tok", "content-type": "application/json" },
      body: { input: { orderId: "o-1" }, instanceId: "o#1", priority: 5 },
    });
  });

  it("list filters become the documented query", async () => {
    const { sent, client } = scripted();
    await client.list({ status: ["running", "waiting_for_timer"], workflow: "order_saga", limit: 10, cursor: "c1", startedAfter: new Date("2026-12-01T00:00:00Z"), tags: { orderId: "o-1", region: "eu" } });
    const url = new URL(sent[0]!.url);
    expect(url.pathname).toBe("/base/instances");
    expect(url.searchParams.get("status")).toBe("running,waiting_for_timer");
    expect(url.searchParams.get("started_after")).toBe("2026-12-01T00:00:00.000Z");
    expect(url.searchParams.getAll("tag")).toEqual(["orderId:o-1", "region:eu"]);
    expect({ workflow: url.searchParams.get("workflow"), limit: url.searchParams.get("limit"), cursor: url.searchParams.get("cursor") }).toEqual({ workflow: "order_saga", limit: "10", cursor: "c1" });
    await client.list();
    expect(sent[1]!.url).toBe("https://edda.example.com/base/instances");
  });

  it("a CloudEvent goes in structured mode with its extensions; get() of an unknown instance is null", async () => {
    const { sent, client } = scripted([() => Response.json({ id: "e-1", duplicate: false }, { status: 202 }), () => Response.json({ error: "not found" }, { status: 404 })]);
    expect(await client.sendEvent({ id: "e-1", source: "/shop", type: "order.paid", data: { n: 1 }, instanceId: "i-9", extensions: { tenant: "t1" } })).toEqual({ id: "e-1", duplicate: false });
    expect(sent[0]!.headers["content-type"]).toBe("application/cloudevents+json");
    expect(sent[0]!.body).toEqual({ tenant: "t1", specversion: "1.0", id: "e-1", source: "/shop", type: "order.paid", eddainstanceid: "i-9", datacontenttype: "application/json", data: { n: 1 } });
    expect(await client.get("gone")).toBeNull();
  });

  it("result() asks in chunks of at most 25 s until it is finished; at its deadline, ResultTimeoutError with the last status", async () => {
    const waiting = () => Response.json({ status: "waiting_for_message" }, { status: 202 });
    const done = () => Response.json({ instanceId: "i-1", workflowName: "w", status: "completed", output: 42, error: null, cancellation: null });
    const { sent, client } = scripted([waiting, waiting, done]);
    expect(await client.result("i-1", { timeoutSeconds: 3600 })).toMatchObject({ status: "completed", output: 42 });
    expect(sent.map((s) => Number(new URL(s.url).searchParams.get("wait")))).toEqual([25, 25, 25]);
    const once = scripted([waiting]);
    const err = await once.client.result("i-1", { timeoutSeconds: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ResultTimeoutError);
    expect(err).toMatchObject({ instanceId: "i-1", status: "waiting_for_message" });
    expect(new URL(once.sent[0]!.url).searchParams.get("wait")).toBe("0.000");
  });
});
