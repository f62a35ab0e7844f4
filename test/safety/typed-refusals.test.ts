// Typed refusals, on real Postgres. Starting an id that belongs to another
// workflow is a conflict (ConflictError in code, 409 over HTTP, an
// EddaApiError 409 in the client), never the other instance passed off as
// this start's. A name Postgres text cannot hold ("x\u0000y") is a
// ValidationError at the call — edda.publish, and inside a workflow
// subscribe / joinGroup / receive / sendTo — never a database error retried
// as transient; MCP's message tool reports it as a tool error. Valid traffic
// flows afterwards.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, EddaApiError } from "../../src/client/index.ts";
import { ConflictError, ValidationError } from "../../src/core/errors.ts";
import { activity, joinGroup, publish, receive, sendTo, subscribe, workflow } from "../../src/index.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const step = activity("tr_step", async (_ctx, v: unknown) => v);
const a = workflow("tr_a", async (ctx, v: unknown) => step(ctx, v));
const b = workflow("tr_b", async (ctx, v: unknown) => step(ctx, v));
const BAD = "x\u0000y";
const attempts = new Map<string, number>();
const inWorkflow = workflow("tr_names", async (ctx, slot: string) => {
  attempts.set(slot, (attempts.get(slot) ?? 0) + 1);
  if (slot === "subscribe") await subscribe(ctx, BAD);
  if (slot === "joinGroup") await joinGroup(ctx, BAD);
  if (slot === "receive") await receive(ctx, BAD);
  if (slot === "sendTo") await sendTo(ctx, "someone", BAD, 1);
  if (slot === "sendTo target") await sendTo(ctx, BAD, "c", 1);
  if (slot === "publish") await publish(ctx, BAD, 1);
  return "unreachable";
});

let t: TestApp;
beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("postgres-js", "typed_refusals"), { workflows: [a, b, inWorkflow] });
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

describe("typed refusals", () => {
  it("an id of another workflow: ConflictError in code, 409 over HTTP and in the client; the same workflow still gets its instance", async () => {
    await t.edda.start(a, 1, { instanceId: "tr-1" });
    await expect(t.edda.start(b, 2, { instanceId: "tr-1" })).rejects.toBeInstanceOf(ConflictError);
    const res = await t.edda.app.request("/workflows/tr_b/instances", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: 2, instanceId: "tr-1" }) });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error_type: "ConflictError" });
    const client = createClient({ baseUrl: "http://localhost", fetch: async (url, init) => t.edda.app.request(url, init) });
    const refused = await client.start("tr_b", 2, { instanceId: "tr-1" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(EddaApiError);
    expect(refused).toMatchObject({ status: 409, errorType: "ConflictError" });
    const again = await t.edda.start(a, 1, { instanceId: "tr-1" });
    expect(again.created).toBe(false);
    expect((await t.waitFor("tr-1")).output).toBe(1);
  });

  it("a NUL in a name is a ValidationError at the call, never a retried database error", async () => {
    await expect(t.edda.publish(BAD, 1)).rejects.toBeInstanceOf(ValidationError);
    await expect(t.edda.publish("fine", 1, { targetInstanceId: BAD })).rejects.toBeInstanceOf(ValidationError);
    for (const slot of ["subscribe", "joinGroup", "receive", "sendTo", "sendTo target", "publish"]) {
      await t.edda.start(inWorkflow, slot, { instanceId: `tr-n-${slot.replace(" ", "-")}` });
      const done = await t.waitFor(`tr-n-${slot.replace(" ", "-")}`, ["failed", "completed", "quarantined"]);
      expect(done.status, slot).toBe("failed");
      expect(JSON.stringify(done.error), slot).toContain("ValidationError");
      expect(JSON.stringify(done.error), slot).not.toMatch(/invalid byte sequence/);
      expect(done.history?.filter((h) => h.eventType === "ActivityAttemptFailed") ?? [], slot).toEqual([]);
    }
    const viaHttp = await t.edda.app.request("/channels/x%00y/messages", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ data: 1 }) });
    expect(viaHttp.status).toBeGreaterThanOrEqual(400);
    expect(viaHttp.status).toBeLessThan(500);
    // valid traffic afterwards
    await t.edda.start(b, { ok: true }, { instanceId: "tr-ok" });
    expect((await t.waitFor("tr-ok")).output).toEqual({ ok: true });
    expect((await t.edda.sweep()).failures ?? []).toEqual([]);
  });
});
