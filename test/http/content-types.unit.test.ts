// JSON routes answer 415 to the content types a page can send without a CORS
// preflight (text/plain, forms, multipart) and to near-misses of JSON, so a
// foreign page cannot drive the API in open mode with a "simple" request; a
// JSON type (with parameters, or a +json suffix) or no Content-Type at all
// passes the door — seen here as the input validation's 422 behind it. Reads
// and CloudEvents ingestion (its own media types) are not this door's. No
// database is asked for. The accepted starts themselves: front-doors.test.ts.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const strict = workflow("ct_strict", { input: z.object({ n: z.number() }) }, async (_ctx, i) => i.n);
const t = appWithoutDatabase({ workflows: [strict], allowedHosts: ["127.0.0.1:8787"] });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const start = (headers: Record<string, string>, body: BodyInit = JSON.stringify({ input: { n: "not a number" } })) =>
  Promise.resolve(t.edda.app.request(new Request("http://127.0.0.1:8787/workflows/ct_strict/instances", { method: "POST", headers, body })));

describe("the JSON door of write routes", () => {
  it("415 for the content types a page sends without a preflight, and for near-misses of JSON", async () => {
    for (const type of ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "text/json"]) {
      const res = await start({ "content-type": type });
      expect(res.status, type).toBe(415);
      expect(await res.json()).toMatchObject({ error_type: "UnsupportedMediaType" });
    }
    const cancel = await t.edda.app.request(new Request("http://127.0.0.1:8787/instances/none/cancel", { method: "POST", headers: { "content-type": "text/plain" }, body: "{}" }));
    expect(cancel.status).toBe(415);
  });

  it("JSON types and no Content-Type pass to the route (its validation answers)", async () => {
    for (const type of ["application/json", "application/json; charset=utf-8", "application/merge-patch+json", "Application/JSON"]) expect((await start({ "content-type": type })).status, type).toBe(422);
    // No Content-Type at all (bytes: a string body would get text/plain): a non-browser client.
    expect((await start({}, new TextEncoder().encode(JSON.stringify({ input: { n: "x" } })))).status).toBe(422);
  });
});
