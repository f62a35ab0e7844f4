// The outbox relay against a real HTTP receiver on 127.0.0.1 and real
// Postgres: structured-mode CloudEvents, every status transition (published,
// invalid, failed with backoff and retry, expired by age and by retries),
// post-commit relay of chosen rows, and two relays racing never sending a row
// twice.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEdda, engineOf } from "../../src/edda.ts";
import { LocalDispatcher } from "../../src/engine/dispatcher.ts";
import type { Engine } from "../../src/engine/engine.ts";
import { relayOutbox, type OutboxOptions } from "../../src/engine/outbox.ts";
import { sendEvent } from "../../src/engine/events.ts";
import { toPayload } from "../../src/core/serialization.ts";
import { InvalidCloudEventError } from "../../src/core/errors.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { startTestBroker, type TestBroker } from "../support/broker.ts";
import { freshDatabase } from "../support/db.ts";

let url: string;
let broker: TestBroker;
const opened: Database[] = [];

async function engineWith(outbox: OutboxOptions & { brokerUrl?: string }): Promise<Engine> {
  const database = createPostgresJsDatabase({ url, max: 4 });
  opened.push(database);
  const edda = createEdda({ workflows: [], database, dispatcher: new LocalDispatcher(), ...(outbox.brokerUrl ? { brokerUrl: outbox.brokerUrl } : {}), outbox });
  return engineOf(edda);
}

beforeAll(async () => {
  url = await freshDatabase("outbox");
  const setup = createPostgresJsDatabase({ url, max: 1 });
  opened.push(setup);
  await migrate(setup.db);
  broker = await startTestBroker();
});

afterAll(async () => {
  await Promise.all(opened.map((d) => d.close()));
  await broker?.stop();
});

let seq = 0;
async function addEvent(engine: Engine, type: string, data: unknown = { n: ++seq }, extra: { extensions?: Record<string, unknown> } = {}): Promise<string> {
  const eventId = `${type}-${++seq}`;
  await engine.storage.addOutboxEvent({
    eventId,
    eventType: type,
    eventSource: "/test/outbox",
    data: toPayload(data),
    ...(data instanceof Uint8Array ? { contentType: "application/octet-stream" } : {}),
    ...(extra.extensions ? { extensions: JSON.stringify(extra.extensions) } : {}),
  });
  return eventId;
}

async function row(engine: Engine, eventId: string) {
  const [r] = await queryRows<{ status: string; retry_count: number; last_error: string | null; published_at: Date | null }>(
    engine.storage.executor,
    sql`SELECT status, retry_count, last_error, published_at FROM outbox_events WHERE event_id = ${eventId}`,
  );
  return r!;
}

describe("relay", () => {
  it("posts a structured-mode CloudEvent; 2xx → published", async () => {
    const engine = await engineWith({ brokerUrl: broker.url });
    const id = await addEvent(engine, "ok.created", { order: "o-1", amount: 12.5 }, { extensions: { tenant: "acme" } });
    const report = await relayOutbox(engine, { eventIds: [id] });
    expect(report).toEqual({ published: 1, invalid: 0, failed: 0, expired: 0, deferred: 0 });
    const [req] = broker.deliveries(id);
    expect(req!.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
    expect(req!.body).toMatchObject({ specversion: "1.0", id, type: "ok.created", source: "/test/outbox", datacontenttype: "application/json", tenant: "acme", data: { order: "o-1", amount: 12.5 } });
    expect(typeof req!.body.time).toBe("string");
    const r = await row(engine, id);
    expect(r.status).toBe("published");
    expect(r.published_at).not.toBeNull();
  });

  it("binary data travels as data_base64", async () => {
    const engine = await engineWith({ brokerUrl: broker.url });
    const id = await addEvent(engine, "ok.binary", new Uint8Array([0, 1, 2, 250]));
    await relayOutbox(engine, { eventIds: [id] });
    const [req] = broker.deliveries(id);
    expect(req!.body.data_base64).toBe(Buffer.from([0, 1, 2, 250]).toString("base64"));
    expect(req!.body.data).toBeUndefined();
    expect((await row(engine, id)).status).toBe("published");
  });

  it("4xx → invalid, never retried", async () => {
    const engine = await engineWith({ brokerUrl: broker.url, initialBackoffSeconds: 0.05 });
    const id = await addEvent(engine, "bad.rejected");
    expect(await relayOutbox(engine, { eventIds: [id] })).toMatchObject({ invalid: 1 });
    const r = await row(engine, id);
    expect(r.status).toBe("invalid");
    expect(r.last_error).toMatch(/HTTP 400/);
    await new Promise((res) => setTimeout(res, 100));
    expect(await relayOutbox(engine, { eventIds: [id] })).toMatchObject({ invalid: 0, published: 0 });
    expect(broker.deliveries(id)).toHaveLength(1);
  });

  it("5xx → failed with retry_count+1 and a backoff; a later sweep retries and publishes it", async () => {
    // A backoff long enough that a slow machine cannot outlast it between the
    // failed attempt and the sweep that must find it still pending.
    const engine = await engineWith({ brokerUrl: broker.url, initialBackoffSeconds: 2 });
    const id = await addEvent(engine, "flaky.once");
    expect(await relayOutbox(engine, { eventIds: [id] })).toMatchObject({ failed: 1 });
    let r = await row(engine, id);
    expect(r).toMatchObject({ status: "failed", retry_count: 1 });
    expect(r.last_error).toMatch(/HTTP 500/);
    // Inside the backoff nothing is sent.
    expect((await engine.sweep()).outbox).toMatchObject({ published: 0, failed: 0 });
    expect(broker.deliveries(id)).toHaveLength(1);
    await new Promise((res) => setTimeout(res, 2_100));
    expect((await engine.sweep()).outbox).toMatchObject({ published: 1 });
    r = await row(engine, id);
    expect(r).toMatchObject({ status: "published", retry_count: 1 });
    expect(broker.deliveries(id)).toHaveLength(2);
  });

  it("a broker that cannot be reached → failed, like a 5xx", async () => {
    const engine = await engineWith({ brokerUrl: "http://127.0.0.1:1/unreachable", timeoutMs: 2000 });
    const id = await addEvent(engine, "ok.nobody-listens");
    expect(await relayOutbox(engine, { eventIds: [id] })).toMatchObject({ failed: 1 });
    const r = await row(engine, id);
    expect(r).toMatchObject({ status: "failed", retry_count: 1 });
    expect(r.last_error).toMatch(/unreachable/);
  });

  it("after maxRetries failed attempts a row is expired", async () => {
    const engine = await engineWith({ brokerUrl: broker.url, initialBackoffSeconds: 0.01, maxBackoffSeconds: 0.01, maxRetries: 2 });
    const id = await addEvent(engine, "down.forever");
    await relayOutbox(engine, { eventIds: [id] });
    await new Promise((res) => setTimeout(res, 30));
    await relayOutbox(engine, { eventIds: [id] });
    expect(await row(engine, id)).toMatchObject({ status: "failed", retry_count: 2 });
    await new Promise((res) => setTimeout(res, 30));
    expect((await engine.sweep()).outbox.expired).toBeGreaterThanOrEqual(1);
    expect((await row(engine, id)).status).toBe("expired");
    expect(broker.deliveries(id)).toHaveLength(2);
  });

  it("rows older than maxAgeSeconds are expired instead of sent", async () => {
    const engine = await engineWith({ brokerUrl: broker.url, maxAgeSeconds: 0.3 });
    const id = await addEvent(engine, "ok.too-late");
    await new Promise((res) => setTimeout(res, 400));
    const report = await relayOutbox(engine);
    expect(report.expired).toBeGreaterThanOrEqual(1);
    expect((await row(engine, id)).status).toBe("expired");
    expect(broker.deliveries(id)).toHaveLength(0);
  });

  it("post-commit relay sends only the rows it is given; without a broker URL rows stay pending", async () => {
    const engine = await engineWith({ brokerUrl: broker.url });
    const mine = await addEvent(engine, "ok.mine");
    const other = await addEvent(engine, "ok.other");
    const relayed: Promise<unknown>[] = [];
    engine.notifyOutbox([mine], { waitUntil: (p) => void relayed.push(p) });
    expect(relayed).toHaveLength(1);
    await Promise.all(relayed);
    expect((await row(engine, mine)).status).toBe("published");
    expect((await row(engine, other)).status).toBe("pending");

    const unconfigured = await engineWith({});
    const none: Promise<unknown>[] = [];
    unconfigured.notifyOutbox([other], { waitUntil: (p) => void none.push(p) });
    expect(none).toHaveLength(0);
    expect(await relayOutbox(unconfigured)).toEqual({ published: 0, invalid: 0, failed: 0, expired: 0, deferred: 0 });
    expect((await row(engine, other)).status).toBe("pending");
  });
});

it("two relays racing on separate connections send each of 200 rows exactly once", { timeout: 30_000 }, async () => {
  const a = await engineWith({ brokerUrl: broker.url });
  const b = await engineWith({ brokerUrl: broker.url });
  await a.storage.executor.execute(sql`UPDATE outbox_events SET status = 'published' WHERE status IN ('pending', 'failed')`);
  const ids: string[] = [];
  for (let i = 0; i < 200; i++) ids.push(await addEvent(a, "ok.race"));
  const [ra, rb] = await Promise.all([relayOutbox(a, { batchSize: 10 }), relayOutbox(b, { batchSize: 10 })]);
  expect(ra.published + rb.published).toBe(200);
  for (const id of ids) expect(broker.deliveries(id)).toHaveLength(1);
  const [left] = await queryRows<{ n: number }>(a.storage.executor, sql`SELECT count(*)::int AS n FROM outbox_events WHERE event_type = 'ok.race' AND status <> 'published'`);
  expect(Number(left!.n)).toBe(0);
});

describe("sendEvent", () => {
  it("posts one structured-mode CloudEvent now (JSON and binary); a rejecting broker throws", async () => {
    const id = await sendEvent({ type: "ok.direct", source: "/test/send", data: { a: 1 }, subject: "s-1", extensions: { tenant: "acme" } }, { brokerUrl: broker.url });
    const [req] = broker.deliveries(id);
    expect(req!.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
    expect(req!.body).toMatchObject({ specversion: "1.0", id, type: "ok.direct", source: "/test/send", subject: "s-1", tenant: "acme", datacontenttype: "application/json", data: { a: 1 } });
    const bin = await sendEvent({ type: "ok.bytes", source: "/test/send", data: new Uint8Array([0, 255, 7]) }, { brokerUrl: broker.url });
    expect(broker.deliveries(bin)[0]!.body).toMatchObject({ datacontenttype: "application/octet-stream", data_base64: Buffer.from([0, 255, 7]).toString("base64") });
    await expect(sendEvent({ type: "bad.rejected", source: "/test/send", data: 1 }, { brokerUrl: broker.url })).rejects.toThrow(/HTTP 400/);
    await expect(sendEvent({ type: "ok.x", source: "/s", extensions: { "Bad-Name": 1 } }, { brokerUrl: broker.url })).rejects.toThrow(InvalidCloudEventError);
  });
});
