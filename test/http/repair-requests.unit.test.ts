// The repair routes' request bodies, refused before storage (422 naming the
// field): a bulk action other than cancel/resume/rerun, a filter member the
// filter does not have or an empty status list, a start bound that is not a
// date-time; a request id outside its alphabet on a bulk, a rerun or a fork;
// a fork without its fromActivityId; an operations page past 100. No
// database is asked for. What storage decides (unknown instances and
// operations, live instances, divergence) and the repairs themselves:
// test/engine/repairs.test.ts and bulk.test.ts on real Postgres.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { orderSaga } from "../../functions/workflows/order-saga.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const t = appWithoutDatabase({ workflows: [orderSaga] });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const post = async (path: string, body: unknown) => {
  const r = await t.request(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, body: (await r.json()) as { error_type?: string; issues?: { path: (string | number)[] }[] } };
};
const firstPath = (r: { body: { issues?: { path: (string | number)[] }[] } }) => r.body.issues?.[0]?.path.join(".");

describe("repair requests", () => {
  it("bulk: an unknown action, filter member, empty status list, bad date or request id is a 422 naming it", async () => {
    const cases: [unknown, string][] = [
      [{ filter: {}, action: "delete" }, "action"],
      [{ filter: { color: "red" }, action: "cancel" }, "filter"],
      [{ filter: { status: [] }, action: "cancel" }, "filter.status"],
      [{ filter: { status: "bogus" }, action: "cancel" }, "filter.status"],
      [{ filter: { startedAfter: "yesterday" }, action: "cancel" }, "filter.startedAfter"],
      [{ filter: { search: "" }, action: "cancel" }, "filter.search"],
      [{ filter: {}, action: "cancel", requestId: "white space" }, "requestId"],
      [{ action: "cancel" }, "filter"],
    ];
    for (const [body, field] of cases) {
      const r = await post("/instances/bulk", body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(firstPath(r), JSON.stringify(body)).toMatch(new RegExp(`^${field.replace(".", "\\.")}`));
    }
  });

  it("rerun and fork: a request id outside its alphabet, a fork without fromActivityId; operations pages of at most 100", async () => {
    expect(firstPath(await post("/instances/o-1/rerun", { requestId: "no spaces/allowed" }))).toBe("requestId");
    expect(firstPath(await post("/instances/o-1/fork", {}))).toBe("fromActivityId");
    expect(firstPath(await post("/instances/o-1/fork", { fromActivityId: "" }))).toBe("fromActivityId");
    expect(firstPath(await post("/instances/o-1/fork", { fromActivityId: "a:1", requestId: "x".repeat(300) }))).toBe("requestId");
    const page = await t.request("/operations?limit=101");
    expect(page.status).toBe(400);
  });
});
