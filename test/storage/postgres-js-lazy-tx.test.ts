// Transactions that begin with their first statement (postgres-js-lazy-tx.ts): a step's lone fenced
// conclusion is sent alone, autocommitted. Against the envelope (postgres.js begin(), BEGIN … COMMIT):
// the same stored state for generated conclusions, fences that hold or not, bodies that write, fail or
// do nothing; then 160 transactions while every backend is terminated 40 times.
import fc from "fast-check";
import postgres from "postgres";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LAST_STATEMENT, queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import type { Fence, StepConclusion, Storage } from "../../src/storage/types.ts";
import { startLatencyProxy } from "../../bench/lib/latency-proxy.ts";
import { freshDatabase } from "../support/db.ts";
import { newInstance, sleep, SOURCE_HASH, uid, WORKFLOW } from "./cases/helpers.ts";

interface Side {
  database: Database;
  storage: Storage;
}

async function open(prefix: string, lazy: boolean, mode: "prepared" | "inline" = "prepared"): Promise<Side & { url: string }> {
  const url = await freshDatabase(prefix);
  const database = createPostgresJsDatabase({ url, max: 10, lazyTransactions: lazy, pipeline: lazy, prepare: mode === "prepared" });
  await migrate(database.db);
  await database.db.execute(sql`CREATE TABLE lazy_user (instance_id text NOT NULL, n int NOT NULL, PRIMARY KEY (instance_id, n))`);
  const storage = createStorage(database);
  await storage.upsertWorkflowDefinition(WORKFLOW, SOURCE_HASH, "async function contract() {}");
  return { url, database, storage };
}

const historyArb = fc.uniqueArray(fc.record({ activityId: fc.constantFrom("a:1", "b:1", "c:2", "d:3"), value: fc.jsonValue({ maxDepth: 2 }) }), {
  selector: (h) => h.activityId,
  maxLength: 3,
});

const caseArb = fc.record({
  stale: fc.boolean(),
  bodyWrites: fc.integer({ min: 0, max: 2 }),
  bodyFails: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
  status: fc.constantFrom("running", "waiting_for_timer", "completed", "failed") as fc.Arbitrary<StepConclusion["status"]>,
  history: historyArb,
  timer: fc.option(fc.integer({ min: 0, max: 3600 }), { nil: undefined }),
  handoff: fc.boolean(),
  output: fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
});
type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

function conclusionOf(c: Case): StepConclusion {
  return {
    status: c.status,
    currentActivityId: c.history[0]?.activityId ?? null,
    history: c.history.map((h) => ({ activityId: h.activityId, eventType: "ActivityCompleted", data: { type: "json", json: JSON.stringify(h.value ?? null) } })),
    ...(c.timer !== undefined ? { timer: { timerId: "t", activityId: "t:1", delaySeconds: c.timer } } : {}),
    ...(c.output !== undefined ? { outputData: JSON.stringify(c.output) } : {}),
    ...(c.handoff ? { handoff: { leaseSeconds: 30 } } : {}),
  };
}

/** One step's transaction as the engine runs it: the activity's writes, then the fenced conclusion, last. */
async function step(side: Side, instanceId: string, c: Case): Promise<unknown> {
  const lease = (await side.storage.acquireLease(instanceId, "w", 30))!;
  let fence: Fence = lease.fence;
  if (c.stale) {
    await side.storage.releaseLease(fence);
    fence = { ...fence };
  }
  const outcome = await side.storage
    .transaction(async (tx) => {
      for (let n = 0; n < c.bodyWrites; n++) await tx.executor.execute(sql`INSERT INTO lazy_user (instance_id, n) VALUES (${instanceId}, ${n})`);
      if (c.bodyFails) throw new Error("the activity failed");
      const r = await tx.concludeStep(fence, conclusionOf(c), { last: true });
      if (!r.ok) throw new Error("lease lost");
      return { committed: true, handedOff: r.token !== undefined };
    })
    .catch((e: Error) => ({ committed: false, error: e.message }));
  const inst = (await side.storage.getInstance(instanceId))!;
  const history = await side.storage.loadHistory(instanceId);
  const users = await queryRows<{ n: number }>(side.database.db, sql`SELECT n FROM lazy_user WHERE instance_id = ${instanceId} ORDER BY n`);
  const timers = await queryRows(side.database.db, sql`SELECT timer_id, activity_id FROM workflow_timer_subscriptions WHERE instance_id = ${instanceId}`);
  return {
    outcome,
    instance: { status: inst.status, lockedBy: inst.lockedBy, lockToken: inst.lockToken, currentActivityId: inst.currentActivityId, outputData: inst.outputData },
    history: history.map((h) => [h.activityId, h.eventType, h.data]),
    users: users.map((u) => u.n),
    timers,
  };
}

describe("lazy transactions ≡ the BEGIN … COMMIT envelope", () => {
  let lazy: Side;
  let envelope: Side;
  beforeAll(async () => {
    [lazy, envelope] = await Promise.all([open("lazy_tx_lazy", true), open("lazy_tx_envelope", false)]);
  });
  afterAll(async () => {
    await Promise.all([lazy.database.close(), envelope.database.close()]);
  });

  it("generated step conclusions leave the same stored state, fenced or not, with or without the activity's writes", { timeout: 120_000 }, async () => {
    let committed = 0;
    let alone = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const instanceId = uid("wf");
        await newInstance(lazy.storage, { instanceId });
        await newInstance(envelope.storage, { instanceId });
        const [a, b] = [await step(lazy, instanceId, c), await step(envelope, instanceId, c)];
        expect(a).toEqual(b);
        // And what both did is what the fence says: all of the step, or none of it.
        const ok = !c.stale && !c.bodyFails;
        expect((a as { outcome: { committed: boolean } }).outcome.committed).toBe(ok);
        expect((a as { users: number[] }).users.length).toBe(ok ? c.bodyWrites : 0);
        if (ok) committed++;
        if (ok && c.bodyWrites === 0) alone++;
      }),
      { numRuns: 120, seed: 20261202 },
    );
    expect(committed).toBeGreaterThan(20);
    expect(alone).toBeGreaterThan(5);
  });

  it("a lone last statement runs without BEGIN; with a statement before it, inside one transaction", async () => {
    const probe = sql`${sql.raw(LAST_STATEMENT)}SELECT now() = statement_timestamp() AS alone`;
    const [lone] = await lazy.database.db.transaction((tx) => queryRows<{ alone: boolean }>(tx, probe));
    const [enveloped] = await envelope.database.db.transaction((tx) => queryRows<{ alone: boolean }>(tx, probe));
    const [behind] = await lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT 1`);
      return queryRows<{ alone: boolean }>(tx, probe);
    });
    expect([lone!.alone, enveloped!.alone, behind!.alone]).toEqual([true, false, false]);
  });

  it("nothing runs after the last statement, nor after the transaction ended; the pool still serves", async () => {
    const id = uid("after");
    await expect(
      lazy.database.db.transaction(async (tx) => {
        await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO lazy_user VALUES (${id}, 1)`);
        await tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, 2)`);
      }),
    ).rejects.toThrow();
    let leaked: Promise<unknown> = Promise.resolve();
    await lazy.database.db.transaction(async (tx) => {
      leaked = sleep(20).then(() => tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, 3)`));
    });
    await expect(leaked).rejects.toThrow();
    const left = await queryRows<{ n: number }>(lazy.database.db, sql`SELECT n FROM lazy_user WHERE instance_id = ${id} ORDER BY n`);
    expect(left.map((r) => r.n)).toEqual([1]);
  });
});

describe("round trips of a transaction (counted by a TCP proxy)", () => {
  it("lone conclusion 1, activity write + conclusion 2 (BEGIN and COMMIT in their flights); the envelope 3 and 4", async () => {
    const url = await freshDatabase("lazy_tx_flights");
    const setup = createPostgresJsDatabase({ url, max: 1 });
    await setup.db.execute(sql`CREATE TABLE flights (n int)`);
    await setup.close();
    const proxy = await startLatencyProxy(url, 2);
    const last = sql`${sql.raw(LAST_STATEMENT)}INSERT INTO flights VALUES (2)`;
    const count = async (opts: { lazyTransactions: boolean; pipeline: boolean }) => {
      const database = createPostgresJsDatabase({ url: proxy.url, max: 1, ...opts });
      // Both statements prepared on the one connection first: the count is the transaction's alone.
      await database.db.transaction(async (tx) => {
        await tx.execute(sql`INSERT INTO flights VALUES (1)`);
        await tx.execute(last);
      });
      const flights: number[] = [];
      proxy.reset();
      await database.db.transaction((tx) => tx.execute(last));
      flights.push(proxy.roundTrips());
      proxy.reset();
      await database.db.transaction(async (tx) => {
        await tx.execute(sql`INSERT INTO flights VALUES (1)`);
        await tx.execute(last);
      });
      flights.push(proxy.roundTrips());
      await database.close();
      return flights;
    };
    try {
      expect(await count({ lazyTransactions: true, pipeline: true })).toEqual([1, 2]);
      expect(await count({ lazyTransactions: true, pipeline: false })).toEqual([1, 4]);
      expect(await count({ lazyTransactions: false, pipeline: false })).toEqual([3, 4]);
    } finally {
      await proxy.stop();
    }
  });
});

describe.each(["prepared", "inline"] as const)("lazy transactions under backend kills (%s statements)", (mode) => {
  let side: Side & { url: string };
  beforeAll(async () => {
    side = await open(`lazy_tx_kills_${mode}`, true, mode);
    // No keys: an effect written twice, or a body committed without its last statement, shows as an extra row.
    await side.database.db.execute(sql`CREATE TABLE kill_body (k int NOT NULL)`);
    await side.database.db.execute(sql`CREATE TABLE kill_last (k int NOT NULL)`);
  });
  afterAll(async () => {
    await side.database.close();
  });

  it("160 transactions while every backend is terminated 40 times: all settle, each effect once", { timeout: 180_000 }, async () => {
    const admin = postgres(side.url, { max: 1, onnotice: () => {} });
    let stop = false;
    let rounds = 0;
    const killer = (async () => {
      while (!stop && rounds < 40) {
        await sleep(15 + Math.floor(Math.random() * 20));
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`;
        rounds++;
      }
    })();
    let failures = 0;
    // Even k: a body statement, then the last one (a real transaction); odd k: the last statement alone.
    const once = (k: number) =>
      side.database.db.transaction(async (tx) => {
        if (k % 2 === 0) {
          await tx.execute(sql`INSERT INTO kill_body (k) VALUES (${k})`);
          await sleep(Math.floor(Math.random() * 10));
        }
        await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO kill_last (k) VALUES (${k})`);
      });
    const done = async (k: number) => (await queryRows(side.database.db, sql`SELECT 1 FROM kill_last WHERE k = ${k}`)).length > 0;
    const settled = await Promise.all(
      Array.from({ length: 160 }, async (_, k) => {
        // Spread over the kill rounds.
        await sleep(k * 6);
        for (let attempt = 0; attempt < 400; attempt++) {
          try {
            // A commit whose reply was lost has landed: the retry checks first, as a fenced step would.
            if (attempt > 0 && (await done(k))) return true;
            await once(k);
            return true;
          } catch {
            failures++;
            await sleep(10);
          }
        }
        return false;
      }),
    );
    // Keep killing until the 40 rounds are done, then check the pool still serves.
    while (rounds < 40) await sleep(20);
    stop = true;
    await killer;
    await admin.end();
    expect(settled.every(Boolean)).toBe(true);
    const body = await queryRows<{ k: number }>(side.database.db, sql`SELECT k FROM kill_body ORDER BY k`);
    const last = await queryRows<{ k: number }>(side.database.db, sql`SELECT k FROM kill_last ORDER BY k`);
    expect(last.map((r) => r.k)).toEqual(Array.from({ length: 160 }, (_, k) => k));
    // Each even transaction's body committed with its last statement: never one without the other.
    expect(body.map((r) => r.k)).toEqual(Array.from({ length: 80 }, (_, i) => 2 * i));
    expect(rounds).toBe(40);
    expect(failures).toBeGreaterThan(0);
    console.log(`lazy transactions (${mode}): 160 settled through 40 kill rounds, ${failures} attempts failed and were retried`);
  });
});
