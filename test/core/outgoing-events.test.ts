// Events Edda sends (core/cloudevent.ts outgoingEvent, toJsonFormat): built
// by the same rules that judge incoming ones, with the outbox's column limits
// (source ≤ 255, datacontenttype ≤ 100), so any event Edda sends it would also
// accept; unset (null/undefined) attributes are left out; non-JSON content
// types carry a string or bytes only; and what toJsonFormat writes,
// fromJsonFormat reads back as the same event (bytes as data_base64).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidCloudEventError } from "../../src/core/errors.ts";
import { fromJsonFormat, INGESTION_LIMITS, OUTBOX_LIMITS, outgoingEvent, toJsonFormat } from "../../src/core/cloudevent.ts";

const base = { specversion: "1.0", id: "e-1", source: "/orders", type: "order.shipped" };
const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidCloudEventError);
    return (e as InvalidCloudEventError).attribute;
  }
  throw new Error("accepted");
};

describe("outgoing events", () => {
  it("drops unset attributes and keeps the rest as given", () => {
    const e = outgoingEvent({ ...base, subject: undefined, time: null, partition: 3, urgent: true }, { n: 1 });
    expect(e).toEqual({ attributes: { ...base, partition: 3, urgent: true }, data: { n: 1 } });
  });

  it("refuses what an incoming event could not be, naming the attribute; the outbox's columns bound source and datacontenttype", () => {
    expect(refusal(() => outgoingEvent({ ...base, id: "" }, null))).toBe("id");
    expect(refusal(() => outgoingEvent({ ...base, type: undefined }, null))).toBe("type");
    expect(refusal(() => outgoingEvent({ ...base, "Bad-Name": 1 }, null))).toBe("Bad-Name");
    expect(refusal(() => outgoingEvent({ ...base, time: "tomorrow" }, null))).toBe("time");
    expect(refusal(() => outgoingEvent({ ...base, ext: 1.5 }, null))).toBe("ext");
    expect(refusal(() => outgoingEvent({ ...base, source: `/${"s".repeat(255)}` }, null))).toBe("source");
    expect(outgoingEvent({ ...base, source: `/${"s".repeat(254)}` }, null).attributes.source).toHaveLength(255);
    expect(OUTBOX_LIMITS.source).toBeLessThan(INGESTION_LIMITS.source!);
    expect(refusal(() => outgoingEvent({ ...base, datacontenttype: `application/${"x".repeat(100)}` }, null))).toBe("datacontenttype");
  });

  it("with a non-JSON content type, data is a string or bytes", () => {
    expect(refusal(() => outgoingEvent({ ...base, datacontenttype: "application/xml" }, { a: 1 }))).toBe("data");
    expect(outgoingEvent({ ...base, datacontenttype: "application/xml" }, "<a/>").data).toBe("<a/>");
    expect(outgoingEvent({ ...base, datacontenttype: "application/octet-stream" }, new Uint8Array([1])).data).toEqual(new Uint8Array([1]));
    expect(outgoingEvent({ ...base, datacontenttype: "application/vnd.api+json" }, { a: 1 }).data).toEqual({ a: 1 });
  });

  it("toJsonFormat, then fromJsonFormat, is the same event; bytes travel as data_base64", () => {
    // As JSON carries them (-0 is written 0).
    const json = fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown).filter((v) => v !== null);
    fc.assert(
      fc.property(fc.oneof(json, fc.uint8Array({ maxLength: 40 })), fc.option(fc.stringMatching(/^[a-zA-Z0-9 äé€-]{1,20}$/), { nil: undefined }), (data, subject) => {
        const event = outgoingEvent({ ...base, subject }, data);
        const text = toJsonFormat(event);
        if (data instanceof Uint8Array) expect(JSON.parse(text)).toHaveProperty("data_base64");
        expect(fromJsonFormat(JSON.parse(text), OUTBOX_LIMITS)).toEqual(event);
      }),
    );
  });
});
