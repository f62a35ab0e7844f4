// Issue 34 (noted when issue 21 closed): a step hands its lease to its follow-up; when the follow-up's
// dispatch failed (the request refused or never sent), the lease stayed held until it expired (30 s)
// although the sweep resumes an idle instance after 2 s. A failed dispatch now gives the handed lease back.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { createEdda, type Edda } from "../../src/edda.ts";
import { HttpDispatcher } from "../../src/engine/http-dispatcher.ts";
import type { Database } from "../../src/storage/database.ts";
import { openTestDatabase } from "../support/engine.ts";

const SECRET = "dropped-dispatch-secret";

describe.each(["throws", "answers 503"] as const)("a follow-up dispatch that %s", (failure) => {
  let db: Database;
  let edda: Edda;
  /** Which follow-up request fails (1-based; the others loop back into the app, as Workers' ctx.exports would). */
  let failAt = 0;
  let calls = 0;
  beforeAll(async () => {
    db = await openTestDatabase("pglite", "dropped_dispatch");
    const loopback: typeof fetch = async (input, init) => {
      if (++calls === failAt) {
        if (failure === "throws") throw new TypeError("fetch failed");
        return new Response("unavailable", { status: 503 });
      }
      return edda.fetch(new Request(input as string, init));
    };
    edda = createEdda({ workflows: [pipeline], database: db, secret: SECRET, dispatcher: new HttpDispatcher({ baseUrl: "http://edda.test", secret: SECRET, fetch: loopback }) });
  });
  afterAll(async () => {
    await edda.close();
  });

  it("gives the handed lease back: the instance is free at once and the sweep's idle rule resumes it", async () => {
    // The start's dispatch (no lease) goes through; the first step's hand-off to its follow-up fails.
    calls = 0;
    failAt = 2;
    const { instanceId } = await edda.start(pipeline, { steps: 2 });
    const deadline = Date.now() + 5_000;
    let inst = await edda.getInstance(instanceId);
    while ((calls < failAt || inst?.runnable !== true) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      inst = await edda.getInstance(instanceId);
    }
    // Free long before the 30 s lease would have run out, nothing run yet.
    expect(inst).toMatchObject({ status: "running", runnable: true });
    expect(calls).toBe(failAt);
    await new Promise((r) => setTimeout(r, 2_100));
    await edda.sweep();
    const end = Date.now() + 10_000;
    while ((await edda.getInstance(instanceId))?.status !== "completed" && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
    expect(await edda.getInstance(instanceId)).toMatchObject({ status: "completed", output: { completed: 2 }, runnable: false });
  });
});
