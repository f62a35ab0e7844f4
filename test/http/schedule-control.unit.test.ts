// Schedule control over HTTP (pause, resume, trigger), the refusals the app
// decides from its own declarations, before storage: a workflow that is not
// in the app, or has no schedule in it, is a 404 naming it; a name longer
// than the column, a 400; a trigger's request id outside its alphabet, a 422.
// No database is asked for. Pausing, resuming and triggering themselves:
// test/engine/repairs.test.ts and test/http/viewer-repairs.test.ts.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const daily = workflow("sc_daily", { schedule: "0 9 * * *", input: z.object({ scheduledAt: z.string() }) }, async () => 1);
const plain = workflow("sc_plain", async () => 1);
const t = appWithoutDatabase({ workflows: [daily, plain] });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

const post = (path: string, body: unknown = {}) => t.request(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

describe("schedule control: refusals", () => {
  it("a workflow not in the app, or without a schedule, is a 404 naming it, for every action", async () => {
    for (const action of ["pause", "resume", "trigger"]) {
      for (const name of ["sc_nope", "sc_plain"]) {
        const r = await post(`/schedules/${name}/${action}`);
        expect(r.status, `${name} ${action}`).toBe(404);
        expect(await r.json()).toMatchObject({ error_type: "NotFoundError", error: `workflow "${name}" has no schedule in this app` });
      }
    }
  });

  it("a name over 255 characters is a 400; a trigger's request id outside [A-Za-z0-9_.:-]{1,100} a 422", async () => {
    expect((await post(`/schedules/${"x".repeat(256)}/pause`)).status).toBe(400);
    for (const requestId of ["a b", "", "x".repeat(101), "ü"]) {
      const r = await post("/schedules/sc_daily/trigger", { requestId });
      expect(r.status, requestId).toBe(422);
    }
  });
});
