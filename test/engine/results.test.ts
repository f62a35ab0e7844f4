// Waiting for an outcome (awaitFinished) on PGlite: woken by the database's
// NOTIFY; and on a driver without LISTEN, the documented fallback reads the
// status about once a second — bounded, never a loop.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workflows } from "../../functions/workflows/index.ts";
import { engineOf } from "../../src/edda.ts";
import { FALLBACK_POLL_MS } from "../../src/engine/results.ts";
import type { Database } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

let database: Database;
beforeAll(async () => {
  database = await openTestDatabase("pglite", "results");
}, 120_000);
afterAll(async () => {
  await database.close();
});

async function waitingApproval(t: TestApp, id: string) {
  await t.edda.start("approval", { requestId: id, timeoutSeconds: 600 }, { instanceId: id });
  await t.waitFor(id, ["waiting_for_message"]);
}

describe.each([
  ["LISTEN (PGlite)", () => database],
  ["the polling fallback (no LISTEN)", (): Database => ({ ...database, listen: undefined })],
])("awaitInstance via %s", (_name, db) => {
  it("returns the instance at the deadline while it waits, and as soon as it finishes", async () => {
    const t = makeTestApp(db(), { workflows });
    const id = `res-${db().listen ? "listen" : "poll"}`;
    try {
      await waitingApproval(t, id);
      const engine = await engineOf(t.edda);
      const before = database.stats.statements;
      const t0 = Date.now();
      const still = await engine.awaitInstance(id, 2);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1900);
      expect(still?.status).toBe("waiting_for_message");
      const reads = database.stats.statements - before;
      // LISTEN: the first read and the one re-read; polling: about one read per second.
      if (db().listen) expect(reads).toBeLessThanOrEqual(3);
      else expect(reads).toBeLessThanOrEqual(2 + Math.ceil(2000 / FALLBACK_POLL_MS) + 1);

      const waiting = engine.awaitInstance(id, 30);
      await new Promise((r) => setTimeout(r, 200));
      const sent = Date.now();
      await engine.publish("approval", { approved: false, approver: "bo" }, { targetInstanceId: id });
      const done = await waiting;
      expect(done).toMatchObject({ status: "completed", output: { status: "rejected", approver: "bo" } });
      expect(Date.now() - sent).toBeLessThan(db().listen ? 3000 : 3000 + FALLBACK_POLL_MS);
    } finally {
      await t.edda.close();
    }
  });
});

it("an aborted wait (the client went away) returns at once", async () => {
  const t = makeTestApp(database, { workflows });
  try {
    await waitingApproval(t, "res-abort");
    const ac = new AbortController();
    const t0 = Date.now();
    const p = (await engineOf(t.edda)).awaitInstance("res-abort", 30, ac.signal);
    setTimeout(() => ac.abort(), 200);
    expect((await p)?.status).toBe("waiting_for_message");
    expect(Date.now() - t0).toBeLessThan(5000);
  } finally {
    await t.edda.close();
  }
});
