// Regression: a payload that looks like the serializer's own tags. Publishing
// `{"data":{"$bytes":"!!!"}}` used to return 202 and then poison the channel:
// decoding the stored message threw (InvalidCharacterError from atob), so no
// subscriber of that channel received anything again — later valid messages
// included — and every sweep failed. The tests check the state after: the
// hostile message arrives unchanged, later messages are delivered, sweeps succeed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { notifier } from "../../functions/workflows/notifier.ts";
import { approval } from "../../functions/workflows/approval.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "tags-token";
let t: TestApp;

const post = (path: string, body: unknown) =>
  t.edda.app.request(path, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` }, body: JSON.stringify(body) });

async function waitingForMessage(id: string) {
  await t.waitFor(id, ["waiting_for_message"]);
}

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("pglite", "tags"), { workflows: [notifier, approval], apiToken: TOKEN });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("payloads shaped like internal encodings", () => {
  it('{"$bytes":"!!!"} published over HTTP reaches subscribers unchanged; later messages still flow and sweeps succeed', async () => {
    const start = await post("/workflows/notifier/instances", { input: { count: 3 }, instanceId: "tags-notifier" });
    expect(start.status).toBe(201);
    await waitingForMessage("tags-notifier");

    const hostile = await post("/channels/notifications/messages", { data: { $bytes: "!!!" } });
    expect(hostile.status).toBe(202);
    const sweep1 = await t.edda.sweep({ resumeIdleSeconds: 0 });
    expect(sweep1.failures).toEqual([]);

    const tagged = { $date: "not a date", $bytes: "AAAA", "$$bytes": 1, __proto__x: 2 };
    expect((await post("/channels/notifications/messages", { data: tagged })).status).toBe(202);
    expect((await post("/channels/notifications/messages", { data: { ok: true } })).status).toBe(202);

    const done = await t.waitFor("tags-notifier");
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ received: [{ $bytes: "!!!" }, tagged, { ok: true }] });
    const sweep2 = await t.edda.sweep({ resumeIdleSeconds: 0 });
    expect(sweep2.failures).toEqual([]);
  });

  it("hostile keys in input, message data and metadata round-trip through a point-to-point message", async () => {
    const hostileKeys = JSON.parse('{"__proto__":{"polluted":1},"constructor":{"prototype":{"x":1}},"$date":"2020-01-01T00:00:00.000Z"}') as Record<string, unknown>;
    expect((await post("/workflows/approval/instances", { input: { requestId: "r", timeoutSeconds: 60 }, instanceId: "tags-approval" })).status).toBe(201);
    await waitingForMessage("tags-approval");
    const sent = await post("/instances/tags-approval/messages", { channel: "approval", data: { approved: true, approver: "ann", extra: hostileKeys }, metadata: hostileKeys });
    expect(sent.status).toBe(202);
    const done = await t.waitFor("tags-approval");
    expect(done.output).toEqual({ status: "approved", approver: "ann" });
    const history = done.history as { eventType: string; data: { data: { extra: unknown }; metadata: unknown } }[];
    const received = history.find((h) => h.eventType === "MessageReceived")!.data;
    expect(received.data.extra).toEqual(hostileKeys);
    expect(Object.getPrototypeOf(received.data.extra)).toBe(Object.prototype);
    expect(Object.hasOwn(received.data.extra as object, "__proto__")).toBe(true);
    expect(received.metadata).toEqual(hostileKeys);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((await t.edda.sweep({ resumeIdleSeconds: 0 })).failures).toEqual([]);
  });
});
