// CloudEvents in binary mode (ce-* headers, HTTP binding §3.1): missing or
// malformed attributes, percent-encoding and quoting errors, a
// ce-datacontenttype header, a JSON Content-Type whose body does not parse —
// each a 400 naming the attribute, decided before anything is stored (no
// database is asked for). Moved from cloudevents.test.ts, which keeps the
// accepted binary events on PGlite.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { waitEvent, workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";
import { eventPoster, expectInvalidEvent, long, uid } from "../support/cloudevents.ts";

const TOKEN = "ce-token";
const waiter = workflow("ce_waiter", async (ctx) => (await waitEvent(ctx, "table.valid")).data);
const handler = workflow("ce_handler", { eventHandler: "table.handled", input: z.object({ n: z.number() }) }, async (_ctx, input) => input);
const t = appWithoutDatabase({ workflows: [waiter, handler], apiToken: TOKEN });
const { binary } = eventPoster(t.request, TOKEN);
// Refused before the ingestion's transaction: nothing was asked of the database, so nothing was stored.
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());
const ceBase = () => ({ specversion: "1.0", id: uid("bin"), source: "/mycontext", type: "table.event" });

describe("binary mode (ce-* headers): refusals", () => {
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
    await expectInvalidEvent(binary(make(), body, contentType), attribute);
  });
});
