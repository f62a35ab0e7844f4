// One rule for reading request bodies (http/body.ts), pure and at the routes
// that use it: bytes are strict UTF-8 (a bad byte is refused, never replaced
// by U+FFFD), JSON parses only within MAX_JSON_DEPTH (string contents do not
// count), JSON content types are application/json and +json types. At a
// per-wait hook (POST /hooks/:token) and the JSON API, a refused body is a
// 400 before anything is looked up — no database is asked for. The same
// hostile bodies against a waiting instance, which then still wakes:
// test/engine/wait-webhooks.test.ts.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { isJsonContentType, jsonBytes, jsonText, jsonTooDeep, MAX_JSON_DEPTH, utf8Text } from "../../src/http/body.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const t = appWithoutDatabase({ workflows: [pipeline] });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const nest = (n: number) => "[".repeat(n) + "]".repeat(n);

describe("body rules", () => {
  it("UTF-8 is strict; JSON nests at most MAX_JSON_DEPTH deep, brackets inside strings not counted", () => {
    expect(utf8Text(new TextEncoder().encode("héllo €"))).toEqual({ ok: true, value: "héllo €" });
    for (const bad of [[0xff], [0xc0, 0xa0], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) expect(utf8Text(new Uint8Array(bad), "the event")).toEqual({ ok: false, reason: "the event is not valid UTF-8" });
    expect(jsonTooDeep(nest(MAX_JSON_DEPTH))).toBe(false);
    expect(jsonTooDeep(nest(MAX_JSON_DEPTH + 1))).toBe(true);
    expect(jsonTooDeep(JSON.stringify({ s: "[".repeat(5000), e: '\\"[[[' }))).toBe(false);
    expect(jsonText(nest(MAX_JSON_DEPTH + 1))).toEqual({ ok: false, reason: `the body nests deeper than ${MAX_JSON_DEPTH} levels` });
    expect(jsonText("{not json")).toEqual({ ok: false, reason: "the body is not valid JSON" });
    expect(jsonBytes(new TextEncoder().encode('{"a":[1]}'))).toEqual({ ok: true, value: { a: [1] } });
    expect(jsonBytes(new Uint8Array([0x7b, 0xff, 0x7d]))).toMatchObject({ ok: false, reason: "the body is not valid UTF-8" });
  });

  it("JSON content types: application/json and +json types, parameters allowed, nothing else", () => {
    for (const ok of ["application/json", "Application/JSON; charset=utf-8", "application/merge-patch+json", "application/vnd.api+json ;x=1", " application/json"]) expect(isJsonContentType(ok), ok).toBe(true);
    for (const no of ["text/json", "application/jsonx", "application/json-seq", "text/plain", "application/x-json+xml", ""]) expect(isJsonContentType(no), no).toBe(false);
  });

  it("a per-wait hook refuses a malformed token (404) and a body that is not UTF-8, or not JSON under a JSON type (400), before any lookup", async () => {
    const token = "A".repeat(43);
    const post = (path: string, body: BodyInit, type = "application/json") => t.request(path, { method: "POST", headers: { "content-type": type }, body });
    for (const path of ["/hooks/..%2F..%2Fetc", `/hooks/${token.slice(1)}`, `/hooks/${token}x`, "/hooks/has%20space"]) {
      const r = await post(path, "{}");
      expect(r.status, path).toBe(404);
      expect(await r.json()).toMatchObject({ error: "no such webhook", error_type: "NotFound" });
    }
    for (const [body, type] of [["{not json", "application/json"], [nest(MAX_JSON_DEPTH + 1), "application/cloudevents+json"], [new Uint8Array([0x68, 0xff]), "text/plain"], [new Uint8Array([0xc0, 0xa0]), "application/octet-stream"]] as const) {
      const r = await post(`/hooks/${token}`, body, type);
      expect(r.status, type).toBe(400);
      expect(await r.json()).toMatchObject({ error_type: "InvalidWebhookBody", retryable: false });
    }
  });

  it("the JSON API refuses a body nested past the limit as malformed JSON (400), before the route runs", async () => {
    const r = await t.request("/workflows/pipeline/instances", { method: "POST", headers: { "content-type": "application/json" }, body: `{"input":${nest(MAX_JSON_DEPTH + 1)}}` });
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({ error_type: "BadRequest", error: expect.stringContaining(`deeper than ${MAX_JSON_DEPTH}`) });
  });
});
