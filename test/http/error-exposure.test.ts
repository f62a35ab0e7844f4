// What the API reveals of a failed workflow: an activity fails with an error
// shaped like an HTTP client's (its request config carries an Authorization
// header) wrapping a cause. The database keeps the stack but never the
// header; GET /instances/:id shows type, message and the cause chain, and a
// stack only when the deployment turns `exposeErrorStacks` on.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, TerminalError, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const SECRET_HEADER = "Bearer very-secret-upstream-token";

const callUpstream = activity("exposure_call_upstream", async () => {
  const root = Object.assign(new Error("connect ECONNREFUSED 10.0.0.7:443"), { code: "ECONNREFUSED", config: { headers: { Authorization: SECRET_HEADER } } });
  throw Object.assign(new TerminalError("upstream request failed", { cause: root }), {
    status: 503,
    config: { url: "https://api.example/charge", headers: { Authorization: SECRET_HEADER } },
  });
});
const charge = workflow("exposure_charge", async (ctx) => callUpstream(ctx));

let quiet: TestApp;
let debug: TestApp;

beforeAll(async () => {
  const database = await openTestDatabase("pglite", "exposure");
  quiet = makeTestApp(database, { workflows: [charge] });
  debug = makeTestApp(database, { workflows: [charge], exposeErrorStacks: true });
});
afterAll(async () => {
  await quiet.edda.close();
  await debug.edda.close();
  await quiet.database.close();
});

describe("stored errors", () => {
  it("keep the stack server-side, never the error's other fields; the API shows type, message and causes, no stack", async () => {
    const { instanceId } = await quiet.edda.start(charge, null, { instanceId: "exposure-1" });
    expect((await quiet.waitFor(instanceId)).status).toBe("failed");

    const rows = await queryRows<{ t: string }>(
      quiet.database.db,
      sql`SELECT coalesce(error_data, '') AS t FROM workflow_instances UNION ALL SELECT coalesce(event_data, '') FROM workflow_history`,
    );
    const stored = rows.map((r) => r.t).join("\n");
    expect(stored).not.toContain("very-secret-upstream-token");
    expect(stored).toContain("at "); // the stack is kept for operators

    const res = await quiet.edda.app.request(`/instances/${instanceId}?history=1`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain("very-secret-upstream-token");
    expect(text).not.toMatch(/\n\s+at |\\n\s+at /);
    const body = JSON.parse(text) as { error: unknown; history: { eventType: string; data: { error?: unknown } }[] };
    expect(body.error).toEqual({
      error_type: "TerminalError",
      error_message: "upstream request failed",
      fields: { status: 503 },
      cause: { name: "Error", message: "connect ECONNREFUSED 10.0.0.7:443", fields: { code: "ECONNREFUSED" } },
    });
    const failed = body.history.find((h) => h.eventType === "ActivityFailed")!;
    expect(failed.data.error).toMatchObject({ name: "TerminalError", cause: { name: "Error" } });
  });

  it("with exposeErrorStacks the same instance shows its stacks (development)", async () => {
    const res = await debug.edda.app.request("/instances/exposure-1?history=1");
    const body = (await res.json()) as { error: { stack?: string; cause?: { stack?: string } } };
    expect(body.error.stack).toContain("upstream request failed");
    expect(body.error.cause?.stack).toContain("ECONNREFUSED");
    expect(JSON.stringify(body)).not.toContain("very-secret-upstream-token");
  });
});
