// The string syntaxes CloudEvents 1.0 refers to (core/cloudevent-syntax.ts),
// as their RFCs write them, tested directly and with properties where another
// implementation can judge: RFC 3339 date-times (every instant
// Date#toISOString writes is one; calendar days, offsets and the leap second
// only in the last UTC minute of a day), RFC 3986 URIs (the WHATWG URL
// parser's absolute URLs are absolute URIs), RFC 2045 media types, strict
// RFC 4648 base64 (Buffer's encoding round-trips), code points as Postgres
// counts them. The HTTP refusals built on them: cloudevents-*.unit.test.ts.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { codePointLength, decodeBase64, encodeBase64, isAbsoluteUri, isCloudEventString, isJsonMediaType, isMediaType, isRfc3339, isUriReference } from "../../src/core/cloudevent-syntax.ts";

describe("CloudEvents syntaxes", () => {
  it("RFC 3339: every instant toISOString writes, with any valid offset; no impossible day, offset or leap second", () => {
    fc.assert(fc.property(fc.date({ min: new Date("0001-01-01T00:00:00Z"), max: new Date("9999-12-31T23:59:59Z"), noInvalidDate: true }), (d) => {
      expect(isRfc3339(d.toISOString())).toBe(true);
    }));
    for (const ok of ["2024-02-29T12:00:00+14:00", "2016-12-31T23:59:60Z", "2017-01-01T05:29:60+05:30", "1990-12-31T15:59:60-08:00", "2026-12-04t12:00:00.123456789z"]) expect(isRfc3339(ok), ok).toBe(true);
    for (const no of ["2023-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-12-04T24:00:00Z", "2026-12-04T12:00:60Z", "2026-12-04T12:00:00+24:00", "2026-12-04T12:00:00", "2026-12-04 12:00:00Z", "26-12-04T12:00:00Z"]) expect(isRfc3339(no), no).toBe(false);
  });

  it("URIs: absolute URLs are absolute URIs; a fragment or a relative reference is not; references allow both", () => {
    fc.assert(fc.property(fc.webUrl({ withQueryParameters: true }), (url) => {
      expect(isAbsoluteUri(new URL(url).href)).toBe(true);
    }));
    for (const ok of ["urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", "mailto:a@b.example", "http://[::1]:8080/a?b=c"]) expect(isAbsoluteUri(ok), ok).toBe(true);
    for (const no of ["https://x.example/#frag", "/relative", "1:555", "http://a b.example/"]) expect(isAbsoluteUri(no), no).toBe(false);
    for (const ok of ["/relative", "../up?q=1#f", "1-555-123-4567", "https://x.example/#frag", ""]) expect(isUriReference(ok), ok).toBe(true);
    for (const no of ["/my context", "/a%zz", "/café", "http://[::1/"]) expect(isUriReference(no), no).toBe(false);
  });

  it("media types: type/subtype with token or quoted parameters; JSON is */json and */*+json", () => {
    for (const ok of ["application/json", "text/plain; charset=utf-8", 'text/plain;format="flowed"', "application/vnd.api+json;x=1"]) expect(isMediaType(ok), ok).toBe(true);
    for (const no of ["xyz", "application/", "text/plain; charset", "text/plain; a=b c", "/json"]) expect(isMediaType(no), no).toBe(false);
    expect(["application/json", "text/json", "application/ld+json; profile=x", "APPLICATION/JSON"].map(isJsonMediaType)).toEqual([true, true, true, true]);
    expect(["application/jsonx", "application/json-seq", "text/plain", "json"].map(isJsonMediaType)).toEqual([false, false, false, false]);
  });

  it("base64: strict, padded, standard alphabet; encode/decode round-trips as Buffer does", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const text = encodeBase64(bytes);
        expect(text).toBe(Buffer.from(bytes).toString("base64"));
        expect(Array.from(decodeBase64(text)!)).toEqual(Array.from(bytes));
      }),
    );
    for (const no of ["AAE", "A===", "!!!!", "AA-_", "AAE=\n", "AA==AA=="]) expect(decodeBase64(no), no).toBeNull();
  });

  it("Strings: no control characters, unpaired surrogates or noncharacters; lengths in code points", () => {
    expect(isCloudEventString("Euro € 😀")).toBe(true);
    for (const no of ["a\u0007", "\u0085", "\uDEAD", "\uD800x", "a\uFFFE", "\uFDD0"]) expect(isCloudEventString(no), JSON.stringify(no)).toBe(false);
    expect(codePointLength("😀😀a")).toBe(3);
    expect(codePointLength("\uD800")).toBe(1);
    fc.assert(fc.property(fc.string({ unit: "grapheme" }), (s) => {
      expect(codePointLength(s)).toBe([...s].length);
    }));
  });
});
