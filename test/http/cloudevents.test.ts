// CloudEvents ingestion against the CloudEvents 1.0 core specification, the
// JSON event format and the HTTP binding, in binary, structured and batch
// modes, through app.request() on PGlite: each accepted case comes from a rule
// or an example of the spec text and asserts 202 and what was stored; the
// events token's refusals leave the counts unchanged, and valid events still
// flow after every rejected request. The refusals each mode decides before
// anything is stored (400 with the attribute and, in a batch, the member's
// index) run without a database: cloudevents-{structured,binary,batch}.unit.test.ts.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { waitEvent, workflow } from "../../src/index.ts";
import { MAX_BATCH_EVENTS } from "../../src/core/cloudevent.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const TOKEN = "ce-token";
let t: TestApp;

const waiter = workflow("ce_waiter", async (ctx) => {
  const e = await waitEvent(ctx, "table.valid");
  return { data: e.data, subject: e.subject, time: e.time, extensions: e.extensions };
});
const handler = workflow("ce_handler", { eventHandler: "table.handled", input: z.object({ n: z.number() }) }, async (_ctx, input) => input);

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("pglite", "cloudevents"), { workflows: [waiter, handler], apiToken: TOKEN });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

async function counts() {
  const [r] = await queryRows<{ m: number; d: number; i: number }>(
    t.database.db,
    sql`SELECT (SELECT count(*)::int FROM channel_messages) AS m, (SELECT count(*)::int FROM cloudevent_dedupe) AS d, (SELECT count(*)::int FROM workflow_instances) AS i`,
  );
  return { messages: Number(r!.m), dedupe: Number(r!.d), instances: Number(r!.i) };
}

let seq = 0;
const uid = (p: string) => `${p}-${++seq}`;
const base = () => ({ specversion: "1.0", id: uid("ev"), source: "/mycontext", type: "table.event" });

const structured = (body: unknown) => send("application/cloudevents+json", JSON.stringify(body));
const batch = (body: unknown) => send("application/cloudevents-batch+json", JSON.stringify(body));
function send(contentType: string, body: string | Uint8Array, headers: Record<string, string> = {}) {
  return t.edda.app.request("/events", { method: "POST", headers: { authorization: `Bearer ${TOKEN}`, "content-type": contentType, ...headers }, body: body as BodyInit });
}
function binary(ce: Record<string, string>, body: string | Uint8Array = "", contentType?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
  for (const [k, v] of Object.entries(ce)) headers[`ce-${k}`] = v;
  if (contentType !== undefined) headers["content-type"] = contentType;
  return t.edda.app.request("/events", { method: "POST", headers, body: body as BodyInit });
}
const ceBase = () => ({ specversion: "1.0", id: uid("bin"), source: "/mycontext", type: "table.event" });

async function expectAccepted(res: Response | Promise<Response>) {
  const r = await res;
  const body = (await r.json()) as Record<string, unknown>;
  expect(r.status, JSON.stringify(body)).toBe(202);
  return body;
}

const long = (n: number) => "x".repeat(n);

describe("structured mode (application/cloudevents+json)", () => {
  const valid: [string, () => Record<string, unknown>][] = [
    ["the four required attributes only", () => base()],
    [
      "JSON format §3.2: JSON data, time, extensions, a null subject",
      () => ({ ...base(), subject: null, time: "2018-04-05T17:31:00Z", comexampleextension1: "value", comexampleothervalue: 5, datacontenttype: "application/json", data: { appinfoA: "abc", appinfoB: 123, appinfoC: true } }),
    ],
    ["JSON format §3.2: XML string data, an unset (null) extension", () => ({ ...base(), unsetextension: null, datacontenttype: "application/xml", data: '<much wow="xml"/>' })],
    ["JSON format §3.2: binary data as data_base64", () => ({ ...base(), datacontenttype: "application/vnd.apache.thrift.binary", data_base64: "AAEC/w==" })],
    ["JSON format §3.2: a string as data, no datacontenttype", () => ({ ...base(), data: "I'm just a string" })],
    ["JSON format §3.1.1: an explicit null payload", () => ({ ...base(), data: null })],
    ["source: https URI", () => ({ ...base(), source: "https://github.com/cloudevents" })],
    ["source: mailto URI", () => ({ ...base(), source: "mailto:cncf-wg-serverless@lists.cncf.io" })],
    ["source: URN with a UUID", () => ({ ...base(), source: "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66" })],
    ["source: application-specific path", () => ({ ...base(), source: "/sensors/tn-1234567/alerts" })],
    ["source: relative reference 1-555-123-4567", () => ({ ...base(), source: "1-555-123-4567" })],
    ["source: IPv6 authority, query and fragment", () => ({ ...base(), source: "http://[::1]:8080/a?b=c#d" })],
    ["time: with an offset and fractional seconds", () => ({ ...base(), time: "2018-04-05T17:31:00.123456+05:30" })],
    ["time: a leap second at the end of a UTC day", () => ({ ...base(), time: "2016-12-31T23:59:60Z" })],
    ["time: a leap second seen from another offset", () => ({ ...base(), time: "2017-01-01T00:59:60+01:00" })],
    ["time: 29 February of a leap year, lower-case t and z", () => ({ ...base(), time: "2024-02-29t12:00:00z" })],
    ["datacontenttype with a parameter", () => ({ ...base(), datacontenttype: "application/json; charset=utf-8", data: { a: 1 } })],
    ["datacontenttype with a quoted parameter", () => ({ ...base(), datacontenttype: 'text/plain;format="flowed"', data: "hi" })],
    ["dataschema: an absolute URI", () => ({ ...base(), dataschema: "https://example.com/schemas/order.json" })],
    ["subject with a surrogate pair used properly", () => ({ ...base(), subject: "\uD800\uDEAD 😀" })],
    ["Integer extension at the 32-bit bounds, Boolean extension", () => ({ ...base(), lo: -2147483648, hi: 2147483647, flag: false })],
    ["extension name of 20 characters", () => ({ ...base(), abcdefghij0123456789: "x" })],
    ["an empty String extension value", () => ({ ...base(), note: "" })],
    ["id of 255 characters, source of 1024", () => ({ ...base(), id: uid(long(240)), source: `/${long(1023)}` })],
  ];
  it.each(valid)("202: %s", async (_name, make) => {
    const event = make();
    const before = await counts();
    const body = await expectAccepted(structured(event));
    expect(body).toMatchObject({ status: "accepted", id: event.id, duplicate: false });
    expect((await counts()).messages).toBe(before.messages + 1);
  });
});

describe("binary mode (ce-* headers)", () => {
  it("202: the HTTP binding §3.1.4 example; attributes percent-decoded and unquoted; data by Content-Type", async () => {
    const w = await t.edda.start(waiter, null);
    await t.waitFor(w.instanceId, ["waiting_for_message"]);
    const r = await binary(
      { ...ceBase(), type: "table.valid", time: "2018-04-05T03:56:24Z", subject: "Euro%20%E2%82%AC%20%F0%9F%98%80", comexampleextension1: '"quoted \\"value\\""', comexampleothervalue: "5" },
      JSON.stringify({ appinfoA: "abc" }),
      "application/json; charset=utf-8",
    );
    await expectAccepted(r);
    const done = await t.waitFor(w.instanceId);
    expect(done.output).toEqual({
      data: { appinfoA: "abc" },
      subject: "Euro € 😀",
      time: "2018-04-05T03:56:24Z",
      // Binary mode carries every value as its canonical string.
      extensions: { comexampleextension1: 'quoted "value"', comexampleothervalue: "5" },
    });
  });

  it("202: no body means no data; text is a string, other media types are bytes; unnecessary percent-encoding is accepted", async () => {
    await expectAccepted(binary(ceBase()));
    await expectAccepted(binary(ceBase(), "plain words", "text/plain"));
    await expectAccepted(binary({ ...ceBase(), source: "%2Fmycontext" }, new Uint8Array([0, 1, 255]), "application/octet-stream"));
    const [row] = await queryRows<{ data_type: string }>(t.database.db, sql`SELECT data_type FROM channel_messages ORDER BY id DESC LIMIT 1`);
    expect(row!.data_type).toBe("binary");
  });
});

describe("batch mode (application/cloudevents-batch+json)", () => {
  it("202 for an empty batch, with nothing to do", async () => {
    const before = await counts();
    expect(await expectAccepted(batch([]))).toEqual({ status: "accepted", events: [] });
    expect(await counts()).toEqual(before);
  });

  it("202 for the JSON format §4.3 example: both events stored, results in order", async () => {
    const a = { ...base(), source: "/mycontext/4", datacontenttype: "application/vnd.apache.thrift.binary", data_base64: "AAEC" };
    const b = { ...base(), source: "/mycontext/9", type: "table.other", datacontenttype: "application/json", data: { appinfoA: "abc" } };
    const before = await counts();
    const body = (await expectAccepted(batch([a, b]))) as { events: { id: string; duplicate: boolean }[] };
    expect(body.events.map((e) => e.id)).toEqual([a.id, b.id]);
    expect(await counts()).toMatchObject({ messages: before.messages + 2, dedupe: before.dedupe + 2 });
  });

  it("a repeated (source, id) inside one batch is stored once and reported as a duplicate", async () => {
    const e = base();
    const body = (await expectAccepted(batch([e, e]))) as { events: { duplicate: boolean }[] };
    expect(body.events.map((x) => x.duplicate)).toEqual([false, true]);
  });

  it(`${MAX_BATCH_EVENTS} events are accepted (one more is a 400: cloudevents-batch.unit.test.ts)`, async () => {
    const before = await counts();
    await expectAccepted(batch(Array.from({ length: MAX_BATCH_EVENTS }, base)));
    expect((await counts()).messages).toBe(before.messages + MAX_BATCH_EVENTS);
  });
});

describe("the events token", () => {
  it("may not target an instance with eddainstanceid unless allowed; nothing is stored", async () => {
    const strict = makeTestApp(t.database, { workflows: [waiter, handler], apiToken: TOKEN, eventsToken: "events-only" });
    const allowed = makeTestApp(t.database, { workflows: [waiter, handler], apiToken: TOKEN, eventsToken: "events-only", eventsTokenTargeting: true });
    const post = (app: TestApp, token: string, body: unknown, ct = "application/cloudevents+json") =>
      app.edda.app.request("/events", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": ct }, body: JSON.stringify(body) });

    const before = await counts();
    const r = await post(strict, "events-only", { ...base(), eddainstanceid: "someone-else" });
    expect(r.status).toBe(403);
    expect(await r.json()).toMatchObject({ error_type: "Forbidden", retryable: false, attribute: "eddainstanceid" });
    const rb = await post(strict, "events-only", [base(), { ...base(), eddainstanceid: "x" }], "application/cloudevents-batch+json");
    expect(rb.status).toBe(403);
    expect(await rb.json()).toMatchObject({ attribute: "eddainstanceid", index: 1 });
    expect(await counts()).toEqual(before);

    expect((await post(strict, "events-only", base())).status).toBe(202);
    expect((await post(strict, TOKEN, { ...base(), eddainstanceid: "x" })).status).toBe(202);
    expect((await post(allowed, "events-only", { ...base(), eddainstanceid: "x" })).status).toBe(202);
    await strict.edda.close();
    await allowed.edda.close();
  });
});

describe("after every rejected request", () => {
  it("valid events still flow: a waiting workflow gets its event, an event handler starts, the sweep succeeds", async () => {
    const w = await t.edda.start(waiter, null);
    await t.waitFor(w.instanceId, ["waiting_for_message"]);
    await expectAccepted(structured({ ...base(), type: "table.valid", subject: "after", data: { ok: true } }));
    expect((await t.waitFor(w.instanceId)).output).toMatchObject({ data: { ok: true }, subject: "after" });
    const started = (await expectAccepted(structured({ ...base(), type: "table.handled", data: { n: 1 } }))) as { instanceId: string };
    expect((await t.waitFor(started.instanceId)).output).toEqual({ n: 1 });
    expect(await t.edda.sweep()).toHaveProperty("timersFired");
  });
});
