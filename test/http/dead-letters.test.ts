// The outbox's dead letters through the API and the typed client, on real
// Postgres with a real HTTP broker: an event that fails until it is expired
// shows up with its stored error (payload-free unless asked); redeliver
// re-arms it and the broker gets it exactly once, also when two redelivers
// race; discard deletes it; pages are bounded and walk every row once; bad
// ids, cursors and parameters are 4xx and change nothing.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, EddaApiError } from "../../src/client/index.ts";
import { activity, sendEventTransactional, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { startTestBroker, type TestBroker } from "../support/broker.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "dead-letter-token";
const announceStep = activity("dl_announce", (ctx, type: string) => sendEventTransactional(ctx, { type, source: "/dead-letters", data: { type, big: "x".repeat(2000) } }));
const announce = workflow("dl_announce", async (ctx, type: string) => announceStep(ctx, type));

let t: TestApp;
let broker: TestBroker;
const auth = { authorization: `Bearer ${TOKEN}` };
const get = async (path: string) => {
  const res = await t.edda.app.request(path, { headers: auth });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};
const post = async (path: string) => {
  const res = await t.edda.app.request(path, { method: "POST", headers: auth });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};
const client = () => createClient({ baseUrl: "http://edda.test", token: TOKEN, fetch: (input, init) => Promise.resolve(t.edda.app.request(input, init)) });

async function row(eventId: string) {
  const [r] = await queryRows<{ status: string; retry_count: number; last_error: string | null }>(
    t.database.db,
    sql`SELECT status, retry_count, last_error FROM outbox_events WHERE event_id = ${eventId}`,
  );
  return r ?? null;
}
async function allRows() {
  return queryRows(t.database.db, sql`SELECT event_id, status, retry_count, last_error, rearmed_at FROM outbox_events ORDER BY event_id`);
}

/** Run the workflow and sweep until its event reaches `status`. */
async function eventUntil(type: string, status: string): Promise<string> {
  const { instanceId } = await t.edda.start(announce, type);
  const eventId = (await t.waitFor(instanceId)).output as string;
  for (let i = 0; i < 20 && (await row(eventId))?.status !== status; i++) {
    await t.edda.sweep({});
    await new Promise((r) => setTimeout(r, 20));
  }
  expect((await row(eventId))?.status).toBe(status);
  return eventId;
}

beforeAll(async () => {
  broker = await startTestBroker();
  t = makeTestApp(await openTestDatabase("postgres-js", "deadletters"), {
    workflows: [announce],
    apiToken: TOKEN,
    brokerUrl: broker.url,
    outbox: { maxRetries: 2, initialBackoffSeconds: 0 },
  });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
  await broker.stop();
});

describe("outbox dead letters", () => {
  let expired: string;

  it("an event that fails until it is expired is listed with its stored error, without payloads unless asked", async () => {
    broker.outage = true;
    expired = await eventUntil("ok.shipped", "expired");
    expect(broker.deliveries(expired).map((d) => d.status)).toEqual([503, 503]);

    const page = await get("/outbox/dead-letters");
    expect(page.status).toBe(200);
    const listed = page.body.events.find((e: { eventId: string }) => e.eventId === expired);
    expect(listed).toMatchObject({ eventId: expired, type: "ok.shipped", source: "/dead-letters", status: "expired", attempts: 2, rearmedAt: null });
    expect(listed.lastError).toMatch(/^broker answered HTTP 503/);
    expect(listed).not.toHaveProperty("data");
    expect(listed).not.toHaveProperty("extensions");

    const full = await get("/outbox/dead-letters?include=payloads&status=expired");
    expect(full.body.events.find((e: { eventId: string }) => e.eventId === expired).data).toEqual({ type: "ok.shipped", big: "x".repeat(2000) });
    expect((await get("/outbox/dead-letters?status=invalid")).body.events.map((e: { eventId: string }) => e.eventId)).not.toContain(expired);
  });

  it("unknown ids are 404 and a dead letter is not redelivered without the token; nothing changes (parameter refusals: dead-letter-params.unit.test.ts)", async () => {
    const before = await allRows();
    const sent = broker.received.length;
    expect((await post("/outbox/dead-letters/no-such-event/redeliver")).status).toBe(404);
    expect((await post("/outbox/dead-letters/no-such-event/discard")).status).toBe(404);
    expect((await t.edda.app.request(`/outbox/dead-letters/${expired}/redeliver`, { method: "POST" })).status).toBe(401);
    expect(await allRows()).toEqual(before);
    expect(broker.received.length).toBe(sent);
  });

  it("redeliver re-arms the dead letter and the broker gets it exactly once, even when two redelivers race", async () => {
    broker.outage = false;
    const [a, b] = await Promise.all([post(`/outbox/dead-letters/${expired}/redeliver`), post(`/outbox/dead-letters/${expired}/redeliver`)]);
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    expect((a.status === 200 ? a : b).body).toEqual({ status: "pending" });
    expect((a.status === 409 ? a : b).body.error_type).toBe("ConflictError");
    await expect.poll(async () => (await row(expired))?.status, { timeout: 10_000 }).toBe("published");
    for (let i = 0; i < 3; i++) await t.edda.sweep({});
    expect(broker.deliveries(expired).filter((d) => d.status === 200)).toHaveLength(1);
    expect((await row(expired))?.status).toBe("published");
    // published: not a dead letter any more, so neither listed nor re-armable
    expect((await get("/outbox/dead-letters")).body.events.map((e: { eventId: string }) => e.eventId)).not.toContain(expired);
    const again = await post(`/outbox/dead-letters/${expired}/redeliver`);
    expect(again.status).toBe(409);
    expect(again.body.error).toContain("published");
    expect((await post(`/outbox/dead-letters/${expired}/discard`)).status).toBe(409);
    expect((await row(expired))?.status).toBe("published");
    expect(broker.deliveries(expired).filter((d) => d.status === 200)).toHaveLength(1);
  });

  it("a re-armed event that keeps failing goes through its retries and is a dead letter again", async () => {
    broker.outage = true;
    const id = await eventUntil("ok.again", "expired");
    expect((await post(`/outbox/dead-letters/${id}/redeliver`)).status).toBe(200);
    for (let i = 0; i < 20 && (await row(id))?.status !== "expired"; i++) await t.edda.sweep({});
    const listed = (await get("/outbox/dead-letters?status=expired")).body.events.find((e: { eventId: string }) => e.eventId === id);
    expect(listed).toMatchObject({ status: "expired", attempts: 2 });
    expect(listed.rearmedAt).not.toBeNull();
    broker.outage = false;
  });

  it("pages of at most `limit` walk every dead letter once, newest first; discard deletes one", async () => {
    const invalid: string[] = [];
    for (let i = 0; i < 5; i++) invalid.push(await eventUntil(`bad.page${i}`, "invalid"));
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await get(`/outbox/dead-letters?status=invalid&limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(r.body.events.length).toBeLessThanOrEqual(2);
      seen.push(...r.body.events.map((e: { eventId: string }) => e.eventId));
      cursor = r.body.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toEqual([...invalid].reverse());
    expect((await get("/outbox/dead-letters?status=invalid")).body.events[0].lastError).toMatch(/^broker answered HTTP 400/);

    const c = client();
    expect((await c.discardDeadLetter(invalid[0]!)).discarded).toBe(true);
    expect(await row(invalid[0]!)).toBeNull();
    await expect(c.discardDeadLetter(invalid[0]!)).rejects.toMatchObject({ status: 404 });
    const listed = await c.deadLetters({ status: "invalid", limit: 100 });
    expect(listed.events.map((e) => e.eventId)).toEqual(invalid.slice(1).reverse());
    expect(listed.events[0]).not.toHaveProperty("data");
    const withData = await c.deadLetters({ type: "bad.page1", include: "payloads" });
    expect(withData.events.map((e) => [e.eventId, e.data])).toEqual([[invalid[1], { type: "bad.page1", big: "x".repeat(2000) }]]);
  });

  it("the typed client re-arms a dead letter and reports refusals as EddaApiError", async () => {
    broker.outage = true;
    const id = await eventUntil("ok.client", "expired");
    broker.outage = false;
    const c = client();
    expect(await c.redeliverDeadLetter(id)).toEqual({ status: "pending" });
    await expect.poll(async () => (await row(id))?.status, { timeout: 10_000 }).toBe("published");
    const err = await c.redeliverDeadLetter(id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EddaApiError);
    expect(err).toMatchObject({ status: 409, errorType: "ConflictError" });
    await expect(c.deadLetters({ cursor: "garbage" })).rejects.toMatchObject({ status: 400 });
  });
});
