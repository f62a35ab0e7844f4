// CloudEvents ingestion against the CloudEvents 1.0 core specification, the
// JSON event format and the HTTP binding, in binary, structured and batch
// modes, through app.request() on PGlite. Each case comes from a rule or an
// example of the spec text; each asserts 202 or 400 (with the attribute and,
// in a batch, the member's index) and that a rejected request stored nothing:
// no dedupe row, no channel message, no instance — and that valid events
// still flow afterwards.
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

type Problem = { error: string; error_type: string; retryable: boolean; attribute?: string; index?: number };

async function expectRejected(res: Response | Promise<Response>, attribute: string | undefined, index?: number) {
  const before = await counts();
  const r = await res;
  const body = (await r.json()) as Problem;
  expect(r.status, JSON.stringify(body)).toBe(400);
  expect(body).toMatchObject({ error_type: "InvalidCloudEvent", retryable: false });
  expect(body.error).toBeTypeOf("string");
  if (attribute !== undefined) expect(body.attribute).toBe(attribute);
  if (index !== undefined) expect(body.index).toBe(index);
  expect(await counts()).toEqual(before);
}

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

  const invalid: [string, () => unknown, string | undefined][] = [
    ["no specversion", () => ({ ...base(), specversion: undefined }), "specversion"],
    ["no id", () => ({ ...base(), id: undefined }), "id"],
    ["no source", () => ({ ...base(), source: undefined }), "source"],
    ["no type", () => ({ ...base(), type: undefined }), "type"],
    ["a null id (null means unset)", () => ({ ...base(), id: null }), "id"],
    ['specversion "0.9"', () => ({ ...base(), specversion: "0.9" }), "specversion"],
    ['specversion "0.3"', () => ({ ...base(), specversion: "0.3" }), "specversion"],
    ["specversion as a number", () => ({ ...base(), specversion: 1.0 }), "specversion"],
    ["an empty id", () => ({ ...base(), id: "" }), "id"],
    ["a numeric id", () => ({ ...base(), id: 1234 }), "id"],
    ["an empty source", () => ({ ...base(), source: "" }), "source"],
    ["source with a space", () => ({ ...base(), source: "/my context" }), "source"],
    ["source with a bad percent-escape", () => ({ ...base(), source: "/a%zz" }), "source"],
    ["source whose first segment has a colon and no valid scheme", () => ({ ...base(), source: "1:555" }), "source"],
    ["source with non-ASCII characters", () => ({ ...base(), source: "/café" }), "source"],
    ["an empty type", () => ({ ...base(), type: "" }), "type"],
    ["type longer than the channel column (255)", () => ({ ...base(), type: long(256) }), "type"],
    ["id longer than 255", () => ({ ...base(), id: long(256) }), "id"],
    ["source longer than 1024", () => ({ ...base(), source: `/${long(1024)}` }), "source"],
    ["an empty subject", () => ({ ...base(), subject: "" }), "subject"],
    ['time "lunchtime"', () => ({ ...base(), time: "lunchtime" }), "time"],
    ["time without an offset", () => ({ ...base(), time: "2018-04-05T17:31:00" }), "time"],
    ["time with an offset of +24:00", () => ({ ...base(), time: "2018-04-05T17:31:00+24:00" }), "time"],
    ["time on 30 February", () => ({ ...base(), time: "2018-02-30T00:00:00Z" }), "time"],
    ["time on 29 February of a common year", () => ({ ...base(), time: "2023-02-29T00:00:00Z" }), "time"],
    ["time with a leap second mid-day", () => ({ ...base(), time: "2018-04-05T17:31:60Z" }), "time"],
    ["time with a space instead of T", () => ({ ...base(), time: "2018-04-05 17:31:00Z" }), "time"],
    ["an empty time", () => ({ ...base(), time: "" }), "time"],
    ['datacontenttype "xyz"', () => ({ ...base(), datacontenttype: "xyz" }), "datacontenttype"],
    ["datacontenttype without a subtype", () => ({ ...base(), datacontenttype: "application/" }), "datacontenttype"],
    ["datacontenttype with a parameter without a value", () => ({ ...base(), datacontenttype: "text/plain; charset" }), "datacontenttype"],
    ["an empty dataschema", () => ({ ...base(), dataschema: "" }), "dataschema"],
    ["a relative dataschema", () => ({ ...base(), dataschema: "/schemas/order.json" }), "dataschema"],
    ["a dataschema with a fragment (not an absolute-URI)", () => ({ ...base(), dataschema: "https://example.com/s.json#/defs/a" }), "dataschema"],
    ["both data and data_base64", () => ({ ...base(), data: { a: 1 }, data_base64: "AAEC" }), "data_base64"],
    ["data_base64 that is not base64", () => ({ ...base(), data_base64: "!!!" }), "data_base64"],
    ["data_base64 without padding", () => ({ ...base(), data_base64: "AAE" }), "data_base64"],
    ["data_base64 as a number", () => ({ ...base(), data_base64: 12 }), "data_base64"],
    ["an object as data with a non-JSON datacontenttype", () => ({ ...base(), datacontenttype: "application/xml", data: { a: 1 } }), "data"],
    ["an upper-case extension name", () => ({ ...base(), Upper: "x" }), "Upper"],
    ["an extension name with a dash", () => ({ ...base(), "with-dash": "x" }), "with-dash"],
    ["an extension name with an underscore", () => ({ ...base(), with_under: "x" }), "with_under"],
    ["an extension name over 20 characters", () => ({ ...base(), abcdefghij0123456789x: "x" }), "abcdefghij0123456789x"],
    ["an object extension value", () => ({ ...base(), ext: { a: 1 } }), "ext"],
    ["an array extension value", () => ({ ...base(), ext: [1] }), "ext"],
    ["a fractional extension value (not an Integer)", () => ({ ...base(), ext: 1.5 }), "ext"],
    ["an Integer extension beyond 32 bits", () => ({ ...base(), ext: 2147483648 }), "ext"],
    ["a control character in a String (U+0007)", () => ({ ...base(), subject: "bell\u0007" }), "subject"],
    ["a C1 control character in a String (U+0085)", () => ({ ...base(), ext: "a\u0085" }), "ext"],
    ["a NUL in the id", () => ({ ...base(), id: "a\u0000b" }), "id"],
    ["an unpaired surrogate", () => ({ ...base(), subject: "\uDEAD" }), "subject"],
    ["a noncharacter (U+FFFE)", () => ({ ...base(), subject: "a\uFFFE" }), "subject"],
    ["an empty eddainstanceid", () => ({ ...base(), eddainstanceid: "" }), "eddainstanceid"],
    ["a numeric eddainstanceid", () => ({ ...base(), eddainstanceid: 5 }), "eddainstanceid"],
    ["a JSON array in structured mode", () => [base()], undefined],
    ["a JSON string in structured mode", () => "event", undefined],
  ];
  it.each(invalid)("400: %s", async (_name, make, attribute) => {
    await expectRejected(structured(make()), attribute);
  });

  it("400 for a body that is not JSON or not UTF-8; 415 for another event format", async () => {
    await expectRejected(send("application/cloudevents+json", "{not json"), undefined);
    await expectRejected(send("application/cloudevents+json", new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])), undefined);
    for (const ct of ["application/cloudevents+avro", "application/cloudevents-batch+xml"]) {
      const before = await counts();
      const r = await send(ct, JSON.stringify(base()));
      expect(r.status).toBe(415);
      expect(await r.json()).toMatchObject({ error_type: "UnsupportedMediaType", retryable: false });
      expect(await counts()).toEqual(before);
    }
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

  const invalid: [string, () => Record<string, string>, string, string | undefined, string][] = [
    ["no ce-* headers at all", () => ({}), "{}", "application/json", "specversion"],
    ["ce-specversion 0.3", () => ({ ...ceBase(), specversion: "0.3" }), "", undefined, "specversion"],
    ["no ce-specversion", () => ({ id: uid("b"), source: "/s", type: "t" }), "", undefined, "specversion"],
    ["no ce-id", () => ({ specversion: "1.0", source: "/s", type: "t" }), "", undefined, "id"],
    ["no ce-source", () => ({ specversion: "1.0", id: uid("b"), type: "t" }), "", undefined, "source"],
    ["no ce-type", () => ({ specversion: "1.0", id: uid("b"), source: "/s" }), "", undefined, "type"],
    ["an empty ce-id", () => ({ ...ceBase(), id: "" }), "", undefined, "id"],
    ["ce-time lunchtime", () => ({ ...ceBase(), time: "lunchtime" }), "", undefined, "time"],
    ["an empty ce-subject", () => ({ ...ceBase(), subject: "" }), "", undefined, "subject"],
    ["a ce-datacontenttype header (Content-Type carries it)", () => ({ ...ceBase(), datacontenttype: "application/json" }), "{}", "application/json", "datacontenttype"],
    ["Content-Type xyz", () => ceBase(), "{}", "xyz", "datacontenttype"],
    ["a relative ce-dataschema", () => ({ ...ceBase(), dataschema: "/schema" }), "", undefined, "dataschema"],
    ["an overlong UTF-8 encoding (%C0%A0)", () => ({ ...ceBase(), subject: "a%C0%A0b" }), "", undefined, "subject"],
    ["a % without two hex digits", () => ({ ...ceBase(), subject: "100%" }), "", undefined, "subject"],
    ["a control character once decoded (%07)", () => ({ ...ceBase(), subject: "bell%07" }), "", undefined, "subject"],
    ["an unterminated quoted string", () => ({ ...ceBase(), subject: '"open' }), "", undefined, "subject"],
    ["an extension header name with an underscore", () => ({ ...ceBase(), bad_name: "x" }), "", undefined, "bad_name"],
    ["a ce-data header (data is reserved)", () => ({ ...ceBase(), data: "x" }), "", undefined, "data"],
    ["type over 255 characters", () => ({ ...ceBase(), type: long(256) }), "", undefined, "type"],
    ["a JSON Content-Type with a body that is not JSON", () => ceBase(), "{oops", "application/json", "data"],
  ];
  it.each(invalid)("400: %s", async (_name, make, body, contentType, attribute) => {
    await expectRejected(binary(make(), body, contentType), attribute);
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

  it(`${MAX_BATCH_EVENTS} events are accepted; one more is a 400`, async () => {
    const before = await counts();
    await expectAccepted(batch(Array.from({ length: MAX_BATCH_EVENTS }, base)));
    expect((await counts()).messages).toBe(before.messages + MAX_BATCH_EVENTS);
    await expectRejected(batch(Array.from({ length: MAX_BATCH_EVENTS + 1 }, base)), undefined);
  });

  const invalid: [string, () => unknown, string | undefined, number | undefined][] = [
    ["a member without id (the valid member before it is not stored)", () => [base(), { ...base(), id: undefined }], "id", 1],
    ["mixed spec versions", () => [base(), { ...base(), specversion: "0.3" }], "specversion", 1],
    ["a member that is not an object", () => [base(), "event"], undefined, 1],
    ["an invalid first member", () => [{ ...base(), time: "lunchtime" }, base()], "time", 0],
    ["a member with both data and data_base64", () => [base(), base(), { ...base(), data: 1, data_base64: "AA==" }], "data_base64", 2],
    ["a member whose type is over 255 characters", () => [base(), { ...base(), type: long(300) }], "type", 1],
    ["a member with data the event handler refuses", () => [base(), { ...base(), type: "table.handled", data: { n: "one" } }], "data", 1],
    ["an object instead of an array", () => base(), undefined, undefined],
  ];
  it.each(invalid)("400: %s", async (_name, make, attribute, index) => {
    await expectRejected(batch(make()), attribute, index);
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
