// The outbox's dead-letter routes, the refusals decided before storage: a
// page of 1–100, a cursor that is not one a page handed out, a status other
// than invalid/expired, an include other than payloads, an event id longer
// than the column — each a 400 BadRequest — and no token, a 401. No database
// is asked for, so nothing can change. Moved from dead-letters.test.ts, which
// keeps the unknown ids (404, storage decides), the pages and the redelivers
// on real Postgres with a real broker.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { activity, sendEventTransactional, workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const TOKEN = "dead-letter-token";
const announceStep = activity("dl_announce", (ctx, type: string) => sendEventTransactional(ctx, { type, source: "/dead-letters", data: { type } }));
const announce = workflow("dl_announce", async (ctx, type: string) => announceStep(ctx, type));
const t = appWithoutDatabase({ workflows: [announce], apiToken: TOKEN, brokerUrl: "http://127.0.0.1:9/broker" });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const auth = { authorization: `Bearer ${TOKEN}` };

describe("dead-letter routes: refusals", () => {
  it("bad parameters and cursors are 400 BadRequest", async () => {
    for (const path of ["/outbox/dead-letters?limit=101", "/outbox/dead-letters?limit=0", "/outbox/dead-letters?cursor=not-a-cursor", `/outbox/dead-letters?cursor=${btoa('["x","y"]')}`, "/outbox/dead-letters?status=published", "/outbox/dead-letters?include=everything"]) {
      const r = await t.request(path, { headers: auth });
      expect(r.status, path).toBe(400);
      expect(((await r.json()) as { error_type: string }).error_type).toBe("BadRequest");
    }
  });

  it("an id longer than the column is a 400; without the token every route is a 401", async () => {
    for (const action of ["redeliver", "discard"]) expect((await t.request(`/outbox/dead-letters/${"x".repeat(256)}/${action}`, { method: "POST", headers: auth })).status, action).toBe(400);
    expect((await t.request("/outbox/dead-letters")).status).toBe(401);
    expect((await t.request("/outbox/dead-letters/e-1/discard", { method: "POST" })).status).toBe(401);
  });
});
