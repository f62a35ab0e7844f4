// Messages and results over HTTP, the refusals decided before storage: a
// point-to-point message without a channel, or with one the column cannot
// hold, or metadata that is not an object; a channel name over 255
// characters on publish; a result wait outside 0–MAX_RESULT_WAIT_SECONDS —
// each a 4xx problem naming it, with no database asked for. Delivery itself
// (and an unknown instance's 404): test/channels/*.test.ts and
// test/http/tagged-payloads.test.ts on Postgres.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { MAX_RESULT_WAIT_SECONDS } from "../../src/http/results.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const t = appWithoutDatabase({ workflows: [pipeline] });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const post = async (path: string, body: unknown) => {
  const r = await t.request(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, body: (await r.json()) as { error_type: string; issues?: { path: (string | number)[] }[] } };
};

describe("message and result requests", () => {
  it("a message to an instance needs a channel of 1–255 characters and object metadata", async () => {
    for (const [body, field] of [
      [{ data: 1 }, "channel"],
      [{ channel: "", data: 1 }, "channel"],
      [{ channel: "c".repeat(256) }, "channel"],
      [{ channel: 5 }, "channel"],
      [{ channel: "go", metadata: "urgent" }, "metadata"],
      [{ channel: "go", metadata: [1] }, "metadata"],
    ] as const) {
      const r = await post("/instances/i-1/messages", body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.body.issues?.[0]?.path[0], JSON.stringify(body)).toBe(field);
    }
  });

  it("publishing: a channel name over 255 characters or bad metadata is a 422", async () => {
    const long = await post(`/channels/${"c".repeat(256)}/messages`, { data: 1 });
    expect(long).toMatchObject({ status: 422, body: { error_type: "ValidationError", issues: [{ path: ["channel"] }] } });
    expect((await post("/channels/jobs/messages", { data: 1, metadata: 7 })).status).toBe(422);
  });

  it(`a result wait is 0 to ${MAX_RESULT_WAIT_SECONDS} seconds`, async () => {
    for (const wait of ["-1", String(MAX_RESULT_WAIT_SECONDS + 1), "soon"]) {
      const r = await t.request(`/instances/i-1/result?wait=${wait}`);
      expect(r.status, wait).toBe(400);
      expect(((await r.json()) as { issues: { path: string[] }[] }).issues[0]!.path).toEqual(["wait"]);
    }
  });
});
