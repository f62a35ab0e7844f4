// CloudEvents in structured mode (application/cloudevents+json): each rule of
// the CloudEvents 1.0 core spec and JSON event format a request can break is a
// 400 naming the attribute, decided before anything is stored — the app runs
// without a database and none is asked for. (The cases moved from
// cloudevents.test.ts, which keeps the accepted events and the flows after
// refusals on PGlite.)
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { waitEvent, workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";
import { baseEvent, eventPoster, expectInvalidEvent, long } from "../support/cloudevents.ts";

const TOKEN = "ce-token";
const waiter = workflow("ce_waiter", async (ctx) => (await waitEvent(ctx, "table.valid")).data);
const handler = workflow("ce_handler", { eventHandler: "table.handled", input: z.object({ n: z.number() }) }, async (_ctx, input) => input);
const t = appWithoutDatabase({ workflows: [waiter, handler], apiToken: TOKEN });
const { structured, send } = eventPoster(t.request, TOKEN);
// Refused before the ingestion's transaction: nothing was asked of the database, so nothing was stored.
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

describe("structured mode (application/cloudevents+json): refusals", () => {
  const invalid: [string, () => unknown, string | undefined][] = [
    ["no specversion", () => ({ ...baseEvent(), specversion: undefined }), "specversion"],
    ["no id", () => ({ ...baseEvent(), id: undefined }), "id"],
    ["no source", () => ({ ...baseEvent(), source: undefined }), "source"],
    ["no type", () => ({ ...baseEvent(), type: undefined }), "type"],
    ["a null id (null means unset)", () => ({ ...baseEvent(), id: null }), "id"],
    ['specversion "0.9"', () => ({ ...baseEvent(), specversion: "0.9" }), "specversion"],
    ['specversion "0.3"', () => ({ ...baseEvent(), specversion: "0.3" }), "specversion"],
    ["specversion as a number", () => ({ ...baseEvent(), specversion: 1.0 }), "specversion"],
    ["an empty id", () => ({ ...baseEvent(), id: "" }), "id"],
    ["a numeric id", () => ({ ...baseEvent(), id: 1234 }), "id"],
    ["an empty source", () => ({ ...baseEvent(), source: "" }), "source"],
    ["source with a space", () => ({ ...baseEvent(), source: "/my context" }), "source"],
    ["source with a bad percent-escape", () => ({ ...baseEvent(), source: "/a%zz" }), "source"],
    ["source whose first segment has a colon and no valid scheme", () => ({ ...baseEvent(), source: "1:555" }), "source"],
    ["source with non-ASCII characters", () => ({ ...baseEvent(), source: "/café" }), "source"],
    ["an empty type", () => ({ ...baseEvent(), type: "" }), "type"],
    ["type longer than the channel column (255)", () => ({ ...baseEvent(), type: long(256) }), "type"],
    ["id longer than 255", () => ({ ...baseEvent(), id: long(256) }), "id"],
    ["source longer than 1024", () => ({ ...baseEvent(), source: `/${long(1024)}` }), "source"],
    ["an empty subject", () => ({ ...baseEvent(), subject: "" }), "subject"],
    ['time "lunchtime"', () => ({ ...baseEvent(), time: "lunchtime" }), "time"],
    ["time without an offset", () => ({ ...baseEvent(), time: "2018-04-05T17:31:00" }), "time"],
    ["time with an offset of +24:00", () => ({ ...baseEvent(), time: "2018-04-05T17:31:00+24:00" }), "time"],
    ["time on 30 February", () => ({ ...baseEvent(), time: "2018-02-30T00:00:00Z" }), "time"],
    ["time on 29 February of a common year", () => ({ ...baseEvent(), time: "2023-02-29T00:00:00Z" }), "time"],
    ["time with a leap second mid-day", () => ({ ...baseEvent(), time: "2018-04-05T17:31:60Z" }), "time"],
    ["time with a space instead of T", () => ({ ...baseEvent(), time: "2018-04-05 17:31:00Z" }), "time"],
    ["an empty time", () => ({ ...baseEvent(), time: "" }), "time"],
    ['datacontenttype "xyz"', () => ({ ...baseEvent(), datacontenttype: "xyz" }), "datacontenttype"],
    ["datacontenttype without a subtype", () => ({ ...baseEvent(), datacontenttype: "application/" }), "datacontenttype"],
    ["datacontenttype with a parameter without a value", () => ({ ...baseEvent(), datacontenttype: "text/plain; charset" }), "datacontenttype"],
    ["an empty dataschema", () => ({ ...baseEvent(), dataschema: "" }), "dataschema"],
    ["a relative dataschema", () => ({ ...baseEvent(), dataschema: "/schemas/order.json" }), "dataschema"],
    ["a dataschema with a fragment (not an absolute-URI)", () => ({ ...baseEvent(), dataschema: "https://example.com/s.json#/defs/a" }), "dataschema"],
    ["both data and data_base64", () => ({ ...baseEvent(), data: { a: 1 }, data_base64: "AAEC" }), "data_base64"],
    ["data_base64 that is not base64", () => ({ ...baseEvent(), data_base64: "!!!" }), "data_base64"],
    ["data_base64 without padding", () => ({ ...baseEvent(), data_base64: "AAE" }), "data_base64"],
    ["data_base64 as a number", () => ({ ...baseEvent(), data_base64: 12 }), "data_base64"],
    ["an object as data with a non-JSON datacontenttype", () => ({ ...baseEvent(), datacontenttype: "application/xml", data: { a: 1 } }), "data"],
    ["an upper-case extension name", () => ({ ...baseEvent(), Upper: "x" }), "Upper"],
    ["an extension name with a dash", () => ({ ...baseEvent(), "with-dash": "x" }), "with-dash"],
    ["an extension name with an underscore", () => ({ ...baseEvent(), with_under: "x" }), "with_under"],
    ["an extension name over 20 characters", () => ({ ...baseEvent(), abcdefghij0123456789x: "x" }), "abcdefghij0123456789x"],
    ["an object extension value", () => ({ ...baseEvent(), ext: { a: 1 } }), "ext"],
    ["an array extension value", () => ({ ...baseEvent(), ext: [1] }), "ext"],
    ["a fractional extension value (not an Integer)", () => ({ ...baseEvent(), ext: 1.5 }), "ext"],
    ["an Integer extension beyond 32 bits", () => ({ ...baseEvent(), ext: 2147483648 }), "ext"],
    ["a control character in a String (U+0007)", () => ({ ...baseEvent(), subject: "bell\u0007" }), "subject"],
    ["a C1 control character in a String (U+0085)", () => ({ ...baseEvent(), ext: "a\u0085" }), "ext"],
    ["a NUL in the id", () => ({ ...baseEvent(), id: "a\u0000b" }), "id"],
    ["an unpaired surrogate", () => ({ ...baseEvent(), subject: "\uDEAD" }), "subject"],
    ["a noncharacter (U+FFFE)", () => ({ ...baseEvent(), subject: "a\uFFFE" }), "subject"],
    ["an empty eddainstanceid", () => ({ ...baseEvent(), eddainstanceid: "" }), "eddainstanceid"],
    ["a numeric eddainstanceid", () => ({ ...baseEvent(), eddainstanceid: 5 }), "eddainstanceid"],
    ["a JSON array in structured mode", () => [baseEvent()], undefined],
    ["a JSON string in structured mode", () => "event", undefined],
  ];
  it.each(invalid)("400: %s", async (_name, make, attribute) => {
    await expectInvalidEvent(structured(make()), attribute);
  });

  it("400 for a body that is not JSON or not UTF-8; 415 for another event format", async () => {
    await expectInvalidEvent(send("application/cloudevents+json", "{not json"), undefined);
    await expectInvalidEvent(send("application/cloudevents+json", new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])), undefined);
    for (const ct of ["application/cloudevents+avro", "application/cloudevents-batch+xml"]) {
      const r = await send(ct, JSON.stringify(baseEvent()));
      expect(r.status).toBe(415);
      expect(await r.json()).toMatchObject({ error_type: "UnsupportedMediaType", retryable: false });
    }
  });
});
