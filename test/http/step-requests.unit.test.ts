// What POST /_edda/step accepts once its signature holds: one step
// (`instanceId`, a lease, a traceparent, the hop) or a batch of 1–500
// (`steps`); anything else is a 422 naming the field, answered before any
// step runs — the app has no database and none is asked for. The steps that
// are accepted run on PGlite in api.test.ts and follow-up-replay.test.ts.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { sign } from "../../src/core/signature.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const t = appWithoutDatabase({ workflows: [pipeline], secret: "step-secret" });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

async function post(body: unknown) {
  const text = JSON.stringify(body);
  const r = await t.request("/_edda/step", { method: "POST", headers: { "content-type": "application/json", ...(await sign("step-secret", { method: "POST", path: "/_edda/step", body: text })) }, body: text });
  return { status: r.status, body: (await r.json()) as { error_type?: string; issues?: { path: (string | number)[] }[] } };
}

const lease = { workerId: "w-1", token: 3 };
const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("POST /_edda/step bodies", () => {
  it("refuses a step without an instance, with a malformed lease, traceparent or hop", async () => {
    for (const bad of [
      {},
      { instanceId: "" },
      { instanceId: "x".repeat(256) },
      { instanceId: 5 },
      { instanceId: "a", lease: { workerId: "w", token: -1 } },
      { instanceId: "a", lease: { workerId: "", token: 1 } },
      { instanceId: "a", lease: { workerId: "w", token: 1.5 } },
      { instanceId: "a", traceparent: "00-abc" },
      { instanceId: "a", traceparent: tp.toUpperCase() },
      { instanceId: "a", hop: -1 },
      { instanceId: "a", hop: 1001 },
    ]) {
      const r = await post(bad);
      expect(r.status, JSON.stringify(bad)).toBe(422);
      expect(r.body.error_type).toBe("ValidationError");
    }
  });

  it("a batch holds 1 to 500 valid steps: an empty one, 501, or one bad member is refused whole", async () => {
    expect((await post({ steps: [] })).status).toBe(422);
    expect((await post({ steps: Array.from({ length: 501 }, (_, i) => ({ instanceId: `i${i}` })) })).status).toBe(422);
    const oneBad = await post({ steps: [{ instanceId: "a", lease }, { instanceId: "" }], hop: 2 });
    expect(oneBad.status).toBe(422);
    expect(JSON.stringify(oneBad.body.issues)).toContain("instanceId");
  });
});
