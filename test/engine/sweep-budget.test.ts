// A sweep with a CPU budget (Workers Free: 10 ms per cron invocation), on real
// Postgres: when the budget is spent at once, due timers still fire first and
// the head of the rotation still runs, the other tasks are deferred, and over
// 11 consecutive turns (minutes) every task ran; without a budget none is deferred.
import { afterAll, beforeAll, expect, it } from "vitest";
import { sleep, workflow } from "../../src/index.ts";
import type { Dispatcher, StepRequest } from "../../src/engine/dispatcher.ts";
import { Engine } from "../../src/engine/engine.ts";
import type { SweepTask } from "../../src/engine/sweeper.ts";
import type { Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import { freshDatabase } from "../support/db.ts";

class RecordingDispatcher implements Dispatcher {
  readonly requests: StepRequest[] = [];
  attach(): void {}
  dispatch(req: StepRequest): void {
    this.requests.push(req);
  }
}

const nap = workflow("sb_nap", async (ctx) => {
  await sleep(ctx, 0);
  return "woke";
});

let database: Database;
let engine: Engine;
const dispatcher = new RecordingDispatcher();
beforeAll(async () => {
  database = createPostgresJsDatabase({ url: await freshDatabase("sweep_budget"), max: 3 });
  await migrate(database.db);
  engine = new Engine({ storage: createStorage(database), workflows: [nap], dispatcher, serviceName: "sweep-budget-test" });
});
afterAll(async () => {
  await database.close();
});

/** A clock past any budget from its second reading on: the budget is spent as soon as the sweep starts. */
const spentAtOnce = () => {
  let reads = 0;
  return () => (reads++ === 0 ? 0 : 1e9);
};

it("a spent budget still fires due timers first and runs the rotation's head; 14 turns run every task", { timeout: 60_000 }, async () => {
  const all = (await engine.sweep({})).deferred;
  expect(all).toEqual([]);

  await engine.start(nap, null, { instanceId: "sb-1" });
  await engine.runStep(dispatcher.requests.splice(0)[0]!);
  const first = await engine.sweep({ cpuBudgetMs: 10, cpuClock: spentAtOnce(), rotationTurn: 0 });
  expect(first.timersFired).toBe(1);
  expect(dispatcher.requests.map((r) => r.instanceId)).toEqual(["sb-1"]);
  // Timers, message timeouts, schedules and one rotating task ran; the other 13 wait.
  expect(first.deferred).toHaveLength(13);
  for (const t of ["timers", "message_timeouts", "schedules"] as const) expect(first.deferred).not.toContain(t);
  expect(first.failures).toEqual([]);

  const rotating: SweepTask[] = ["webhook_expiry", "deadlines", "stale_leases", "channel_delivery", "resumable", "parked", "outbox", "channel_retention", "instance_retention", "dedupe_retention", "session_retention", "concurrency", "timed_starts", "bulk_operations"];
  const ran = new Set<SweepTask>();
  for (let turn = 0; turn < rotating.length; turn++) {
    const r = await engine.sweep({ cpuBudgetMs: 10, cpuClock: spentAtOnce(), rotationTurn: turn });
    expect(r.failures).toEqual([]);
    expect(r.skipped).toEqual([]);
    const here = rotating.filter((t) => !r.deferred.includes(t));
    expect(here).toHaveLength(1);
    ran.add(here[0]!);
  }
  expect([...ran].sort()).toEqual([...rotating].sort());

  // The instance the first sweep woke completes: valid work still flows under the budget.
  expect((await engine.runStep(dispatcher.requests[0]!)).status).toBe("concluded");
});
