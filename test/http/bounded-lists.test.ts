// Bounded work per request: a list page holds at most 100 instances and no
// payloads (input, output) unless `?include=payloads` asks for them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

let t: TestApp;
beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("pglite", "lists"), { workflows: [pipeline] });
  for (let i = 0; i < 3; i++) await t.waitFor((await t.edda.start(pipeline, { steps: 0, pad: "p".repeat(1000) } as never)).instanceId);
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("GET /instances", () => {
  it("leaves input and output out by default and returns them with ?include=payloads", async () => {
    const plain = (await (await t.edda.app.request("/instances?workflow=pipeline")).json()) as { instances: Record<string, unknown>[] };
    expect(plain.instances).toHaveLength(3);
    for (const i of plain.instances) {
      expect(i).not.toHaveProperty("input");
      expect(i).not.toHaveProperty("output");
      expect(i).toMatchObject({ workflowName: "pipeline", status: "completed" });
    }
    const full = (await (await t.edda.app.request("/instances?workflow=pipeline&include=payloads")).json()) as { instances: Record<string, unknown>[] };
    expect(full.instances[0]).toHaveProperty("input");
    expect(full.instances[0]).toHaveProperty("output");
  });

  it("serves a page of 100, the cap (a larger limit or an unknown include is a 400: list-params.unit.test.ts)", async () => {
    expect((await t.edda.app.request("/instances?limit=100")).status).toBe(200);
  });
});
