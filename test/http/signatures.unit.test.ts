// Signed internal calls (POST /_edda/step, /_edda/sweep): the HMAC covers
// method, path, query, timestamp and body, within ±60 s. A captured request is
// accepted as sent, refused with a query string appended, refused once its
// timestamp is outside the window, and a request signed with its query is
// accepted with exactly that query. Refusals are 401 before anything runs:
// the app has no database and none is asked for. "Accepted" is seen at the
// step route, whose next check, the body, refuses "{}" with a 422 — past the
// signature, still before the database. Without EDDA_SECRET every signed
// route answers the same 401 and the operator's log says why. (This file ran
// on real Postgres; nothing in it needs one: the accepted sweep and step are
// in api.test.ts.) On Node the MAC is node:crypto's, byte for byte the Web Crypto one.
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { sign } from "../../src/core/signature.ts";
import { activity, workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const step = activity("sg_step", async (_ctx, v: number) => v * 2);
const dbl = workflow("sg_double", async (ctx, n: number) => step(ctx, n));
const t = appWithoutDatabase({ workflows: [dbl], secret: "sig-secret" });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const post = (path: string, headers: Record<string, string>, body = "{}") => t.request(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
/** 422: the signature held and the body was read (and refused); 401: it did not. */
const verdict = async (path: string, headers: Record<string, string>) => {
  const r = await post(path, headers);
  return r.status === 422 ? "accepted" : r.status === 401 ? "refused" : `status ${r.status}`;
};
const signed = (query?: string, at?: number) => sign("sig-secret", { method: "POST", path: "/_edda/step", ...(query ? { query } : {}), body: "{}" }, at);

describe("signed internal calls", () => {
  it("the MAC covers the query; the window is ±60 s", async () => {
    const captured = await signed();
    expect(await verdict("/_edda/step", captured)).toBe("accepted");
    expect(await verdict("/_edda/step?x=1", captured)).toBe("refused");
    expect(await verdict("/_edda/step?", captured)).toBe("accepted"); // an empty query is no query
    const now = Math.floor(Date.now() / 1000);
    expect(await verdict("/_edda/step", await signed(undefined, now - 120))).toBe("refused");
    expect(await verdict("/_edda/step", await signed(undefined, now + 120))).toBe("refused");
    expect(await verdict("/_edda/step", await signed(undefined, now - 50))).toBe("accepted");
    const withQuery = await signed("?only=timers");
    expect(await verdict("/_edda/step?only=timers", withQuery)).toBe("accepted");
    expect(await verdict("/_edda/step?only=outbox", withQuery)).toBe("refused");
    expect(await verdict("/_edda/step", withQuery)).toBe("refused");
  });

  it("a signature for one route, method or body is refused on another; a missing or garbled one too", async () => {
    const captured = await signed();
    expect((await post("/_edda/sweep", captured)).status).toBe(401);
    expect(await verdict("/_edda/step", await sign("sig-secret", { method: "GET", path: "/_edda/step", body: "{}" }))).toBe("refused");
    const r = await post("/_edda/step", captured, '{"instanceId":"someone"}');
    expect(r.status).toBe(401);
    expect(await r.json()).toMatchObject({ error: "missing or invalid signature", error_type: "Unauthorized", status: 401 });
    expect(r.headers.get("www-authenticate")).toMatch(/^EddaSignature realm="edda-internal"/);
    expect(await verdict("/_edda/step", {})).toBe("refused");
    expect(await verdict("/_edda/step", { ...captured, "x-edda-signature": "sha256=00" })).toBe("refused");
    expect(await verdict("/_edda/step", { ...captured, "x-edda-timestamp": "soon" })).toBe("refused");
  });

  it("without EDDA_SECRET a signed route answers the same 401 and logs the configuration error", async () => {
    const unkeyed = appWithoutDatabase({ workflows: [dbl] });
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const r = await unkeyed.request("/_edda/sweep", { method: "POST", headers: await sign("sig-secret", { method: "POST", path: "/_edda/sweep", body: "" }), body: "" });
      expect(r.status).toBe(401);
      expect(await r.json()).toMatchObject({ error: "missing or invalid signature" });
      expect(logged.mock.calls.map((c) => String(c[0]))).toEqual(["edda: configuration error: an internal route was called but EDDA_SECRET is not set"]);
      expect(unkeyed.touched).toEqual([]);
    } finally {
      logged.mockRestore();
      await unkeyed.edda.close();
    }
  });

  it("on Node the MAC (node:crypto) is the Web Crypto HMAC-SHA256 other runtimes compute, non-ASCII secret and body included", async () => {
    const secret = "sécret-🔑";
    const body = JSON.stringify({ instanceId: "ünïcode-☃", hop: 1 });
    const headers = await sign(secret, { method: "post", path: "/_edda/step", body }, 1_800_000_000);
    const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`v1\nPOST\n/_edda/step\n1800000000\n${body}`));
    const hex = Array.from(new Uint8Array(mac), (b) => b.toString(16).padStart(2, "0")).join("");
    expect(headers).toEqual({ "x-edda-timestamp": "1800000000", "x-edda-signature": `sha256=${hex}` });
  });
});
