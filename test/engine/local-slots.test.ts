// Issue 36 item 5, head-of-line blocking on one Node process: the in-process
// dispatcher runs a bounded number of steps at once (8 by default), and a step
// used to hold its slot for the whole of its activity — eight slow external
// calls (an LLM, a partner API) stalled every other workflow on the process.
// A step waiting on non-transactional activities now lends its slot: twelve
// slow calls in flight, ten short workflows still finish while all twelve wait.
// Progress is asserted (who finished while whom was still blocked), never
// wall-clock thresholds.
import { afterAll, describe, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { LocalDispatcher } from "../../src/engine/dispatcher.ts";
import type { Database } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase } from "../support/engine.ts";

const open: Database[] = [];
afterAll(async () => {
  await Promise.all(open.map((d) => d.close().catch(() => undefined)));
});

/** The slow calls' gate: they all wait on it until the test opens it. */
let gate!: { opened: Promise<void>; open: () => void };
let callsInFlight = 0;
const resetGate = () => {
  let open!: () => void;
  gate = { opened: new Promise<void>((r) => (open = r)), open };
  callsInFlight = 0;
};

const slowCall = activity(
  "slots_slow_call",
  async () => {
    callsInFlight++;
    await gate.opened;
    return "answered";
  },
  { transactional: false },
);
const quick = activity("slots_quick", async (_ctx, n: number) => n * 2);

const slowFlow = workflow("slots_slow", async (ctx) => slowCall(ctx));
const shortFlow = workflow("slots_short", async (ctx, { n }: { n: number }) => quick(ctx, n));

async function until<T>(what: string, check: () => Promise<T | null | false> | T | null | false, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("the in-process dispatcher's slots", () => {
  it("twelve slow non-transactional activities in flight take no slot: ten short workflows finish while all twelve still wait", async () => {
    resetGate();
    const database = await openTestDatabase("postgres-js", "local_slots");
    open.push(database);
    const dispatcher = new LocalDispatcher({ concurrency: 8 });
    const app = makeTestApp(database, { workflows: [slowFlow, shortFlow], dispatcher, viewer: false });
    try {
      const slow = await Promise.all(Array.from({ length: 12 }, (_, i) => app.edda.start(slowFlow, {}, { instanceId: `slow-${i}` })));
      // All twelve calls are in flight at once, more than the eight slots.
      await until("twelve slow calls in flight", () => callsInFlight === 12);
      const short = await Promise.all(Array.from({ length: 10 }, (_, n) => app.edda.start(shortFlow, { n }, { instanceId: `short-${n}` })));
      for (const s of short) {
        const done = await app.waitFor(s.instanceId);
        expect(done.status).toBe("completed");
      }
      // Every short workflow completed while every slow call was still waiting.
      expect(callsInFlight).toBe(12);
      for (const s of slow) expect((await app.edda.getInstance(s.instanceId))!.status).toBe("running");

      gate.open();
      for (const s of slow) {
        const done = await app.waitFor(s.instanceId);
        expect(done.status).toBe("completed");
        expect(done.output).toBe("answered");
      }
      await dispatcher.idle();
    } finally {
      gate.open();
      await app.edda.close();
    }
  });

  it("the limit is an option (concurrency, default 8) and still bounds steps that are not waiting outside", async () => {
    resetGate();
    const database = await openTestDatabase("postgres-js", "local_slots_bound");
    open.push(database);
    // One slot: the slow call lends it, so the short workflow runs; the bound itself stays.
    const dispatcher = new LocalDispatcher({ concurrency: 1 });
    const app = makeTestApp(database, { workflows: [slowFlow, shortFlow], dispatcher, viewer: false });
    try {
      await app.edda.start(slowFlow, {}, { instanceId: "slow-one" });
      await until("the slow call in flight", () => callsInFlight === 1);
      await app.edda.start(shortFlow, { n: 21 }, { instanceId: "short-one" });
      expect((await app.waitFor("short-one")).output).toBe(42);
      expect((await app.edda.getInstance("slow-one"))!.status).toBe("running");
      gate.open();
      expect((await app.waitFor("slow-one")).output).toBe("answered");
    } finally {
      gate.open();
      await app.edda.close();
    }
  });
});
