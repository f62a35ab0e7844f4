// race() on real databases: the first_response example on all three drivers,
// and messages landing at the instant of the timeout with several engines
// delivering and sweeping at once — never two winners, never a lost message.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onMessage, onTimer, race, sendTo, waitMessage, workflow } from "../../src/index.ts";
import { firstResponse } from "../../functions/workflows/first-response.ts";
import { freshPostgres, makeTestApp, openTestDatabase, type DriverKind, type TestApp } from "../support/engine.ts";

describe.each<DriverKind>(["pglite", "postgres-js", "neon"])("first_response on %s", (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = makeTestApp(await openTestDatabase(kind, `first_response_${kind}`), { workflows: [firstResponse] });
  });
  afterAll(async () => {
    await t.edda.close();
  });

  it("a response before the timeout wins with its data", async () => {
    const { instanceId } = await t.edda.start(firstResponse, { requestId: "r1", timeoutSeconds: 60 });
    await t.waitFor(instanceId, ["waiting_for_message"]);
    await sendTo(t.edda, instanceId, "response", { ok: 1 });
    const done = await t.waitFor(instanceId);
    expect(done.output).toEqual({ winner: "message", data: { ok: 1 } });
  });

  it("a response sent before the race started is not lost", async () => {
    const instanceId = `fr-early-${kind}`;
    const start = t.edda.start(firstResponse, { requestId: "r2", timeoutSeconds: 60 }, { instanceId });
    await sendTo(t.edda, instanceId, "response", "early");
    await start;
    expect((await t.waitFor(instanceId)).output).toEqual({ winner: "message", data: "early" });
  });

  it("the timer wins when no response comes; the wait is cleared and nothing is left waiting", async () => {
    const { instanceId } = await t.edda.start(firstResponse, { requestId: "r3", timeoutSeconds: 0.3 });
    const done = await t.waitFor(instanceId);
    expect(done.output).toEqual({ winner: "timer" });
    expect((done.history as { activityId: string; eventType: string }[]).map((h) => `${h.activityId} ${h.eventType}`)).toEqual(["race:1 MessageTimeout"]);
  });
});

const raceThenDrain = workflow("race_then_drain", async (ctx, timeoutSeconds: number) => {
  const r = await race(ctx, { message: onMessage<string>("response"), timer: onTimer(timeoutSeconds) });
  // A message that lost the race must still be there for the next wait.
  const late = r.winner === "timer" ? (await waitMessage<string>(ctx, "response", { timeoutSeconds: 30 })).data : null;
  return { winner: r.winner, data: r.winner === "message" ? r.value.data : null, late };
});

describe("race on real Postgres with several engines", () => {
  const apps: TestApp[] = [];
  beforeAll(async () => {
    const pg = await freshPostgres("race_engines");
    for (let i = 0; i < 3; i++) apps.push(makeTestApp(pg.open(), { workflows: [raceThenDrain] }));
  });
  afterAll(async () => {
    for (const a of apps) await a.edda.close();
  });

  it("messages landing at the timeout instant: exactly one winner each, every message received exactly once", async () => {
    const n = 24;
    const timeout = 3;
    const t0 = Date.now();
    const started = await Promise.all(Array.from({ length: n }, (_, i) => apps[i % 3]!.edda.start(raceThenDrain, timeout)));
    // The sends are spread over ±300 ms around the expiry instant, from three engines, while all three sweep.
    const sweeping = apps.map(async (a) => {
      for (let k = 0; k < 40; k++) {
        await a.edda.sweep();
        await new Promise((r) => setTimeout(r, 25));
      }
    });
    await Promise.all(
      started.map(async (s, i) => {
        const at = t0 + timeout * 1000 - 300 + (600 * i) / n;
        await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
        await sendTo(apps[(i + 1) % 3]!.edda, s.instanceId, "response", `m${i}`);
      }),
    );
    await Promise.all(sweeping);
    const winners: Record<string, number> = {};
    for (const [i, s] of started.entries()) {
      const done = await apps[i % 3]!.waitFor(s.instanceId, ["completed", "failed"], 30_000);
      const out = done.output as { winner: string; data: string | null; late: string | null };
      expect(done.status).toBe("completed");
      winners[out.winner] = (winners[out.winner] ?? 0) + 1;
      // The message is received exactly once: by the race, or by the wait after it.
      expect([out.data, out.late].filter((x) => x !== null)).toEqual([`m${i}`]);
      const raceRows = (done.history as { activityId: string }[]).filter((h) => h.activityId === "race:1");
      expect(raceRows).toHaveLength(1);
    }
    console.log(`race at the timeout instant: ${JSON.stringify(winners)} of ${n}`);
  }, 90_000);
});
