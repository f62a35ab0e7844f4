// GET /instances/:id/history, the parameters refused before storage: a page
// of 1–HISTORY_PAGE_MAX entries, an `after` that is not a cursor a page
// handed out (a sequence number), a format other than json or ndjson — each
// a 400 naming it — and no token, a 401. No database is asked for. The pages
// and the NDJSON export themselves, and an unknown instance's 404:
// history-export.test.ts and safety/history-paging.test.ts on Postgres.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { HISTORY_PAGE_MAX } from "../../src/engine/views.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const TOKEN = "hx-token";
const t = appWithoutDatabase({ workflows: [pipeline], apiToken: TOKEN });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

describe("history requests", () => {
  it("limit, after and format outside their forms are 400 naming them; no token is a 401", async () => {
    for (const [q, field] of [
      ["limit=0", "limit"],
      [`limit=${HISTORY_PAGE_MAX + 1}`, "limit"],
      ["limit=many", "limit"],
      ["after=-1", "after"],
      ["after=abc", "after"],
      [`after=${"9".repeat(16)}`, "after"],
      ["format=xml", "format"],
      ["format=NDJSON", "format"],
    ] as const) {
      const r = await t.request(`/instances/i-1/history?${q}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(r.status, q).toBe(400);
      expect(((await r.json()) as { issues: { path: string[] }[] }).issues[0]!.path, q).toEqual([field]);
    }
    expect((await t.request("/instances/i-1/history?format=ndjson")).status).toBe(401);
  });
});
