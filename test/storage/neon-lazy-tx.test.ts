// Lazy transactions on Neon's driver (neon-lazy-tx.ts), through the local WebSocket proxy: BEGIN in the
// first statement's flight, COMMIT in the conclusion's, a lone conclusion alone. Against drizzle's
// BEGIN … COMMIT (lazyTransactions: false): the same stored state for generated conclusions; the flights
// counted by a proxy; then 160 transactions while every backend is terminated 40 times.
import fc from "fast-check";
import postgres from "postgres";
import WebSocket from "ws";
import { sql } from "drizzle-orm";
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LAST_STATEMENT, queryRows, type Database } from "../../src/storage/database.ts";
import { createNeonDatabase } from "../../src/storage/drivers/neon-serverless.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import type { Fence, StepConclusion, Storage } from "../../src/storage/types.ts";
import { startLatencyProxy } from "../../bench/lib/latency-proxy.ts";
import { freshDatabase, useLocalNeonProxy } from "../support/db.ts";
import { newInstance, sleep, SOURCE_HASH, uid, WORKFLOW } from "./cases/helpers.ts";

interface Side {
  url: string;
  database: Database;
  storage: Storage;
}

async function open(prefix: string, lazy: boolean): Promise<Side> {
  useLocalNeonProxy();
  const url = await freshDatabase(prefix);
  const database = createNeonDatabase({ url, max: 10, lazyTransactions: lazy });
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
  // A write without parameters goes by the simple protocol: BEGIN then rides in its text.
  simpleWrite: fc.boolean(),
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
      for (let n = 0; n < c.bodyWrites; n++) {
        await tx.executor.execute(
          c.simpleWrite && n === 0
            ? sql.raw(`INSERT INTO lazy_user (instance_id, n) VALUES ('${instanceId}', ${n})`)
            : sql`INSERT INTO lazy_user (instance_id, n) VALUES (${instanceId}, ${n})`,
        );
      }
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

/** The messages of an error and its causes (drizzle wraps a statement's error in "Failed query: …"). */
async function failure(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  const out: string[] = [];
  for (let e = err, i = 0; e instanceof Error && i < 6; e = e.cause, i++) out.push(e.message);
  return out.join(" / ");
}

/** Sessions left inside a transaction: a connection handed back mid-transaction would show here. */
async function openTransactions(side: Side): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    side.database.db,
    sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
  );
  return row!.n;
}

describe("lazy transactions on Neon's driver ≡ drizzle's BEGIN … COMMIT", () => {
  let lazy: Side;
  let envelope: Side;
  beforeAll(async () => {
    [lazy, envelope] = await Promise.all([open("neon_lazy_lazy", true), open("neon_lazy_envelope", false)]);
  });
  afterAll(async () => {
    await Promise.all([lazy.database.close(), envelope.database.close()]);
  });

  it("generated step conclusions leave the same stored state, fenced or not, with or without the activity's writes", { timeout: 180_000 }, async () => {
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
    // No connection went back to the pool inside a transaction (a failed fence leaves one aborted until ROLLBACK).
    expect(await openTransactions(lazy)).toBe(0);
  });

  it("a lone last statement runs without BEGIN; with a statement before it, inside one transaction", async () => {
    const probe = sql`${sql.raw(LAST_STATEMENT)}SELECT now() = statement_timestamp() AS alone`;
    const [lone] = await lazy.database.db.transaction((tx) => queryRows<{ alone: boolean }>(tx, probe));
    const [enveloped] = await envelope.database.db.transaction((tx) => queryRows<{ alone: boolean }>(tx, probe));
    const [behind] = await lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT ${1}::int`);
      return queryRows<{ alone: boolean }>(tx, probe);
    });
    const [behindSimple] = await lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT 1`);
      return queryRows<{ alone: boolean }>(tx, probe);
    });
    expect([lone!.alone, enveloped!.alone, behind!.alone, behindSimple!.alone]).toEqual([true, false, false, false]);
  });

  it("a BEGIN with settings keeps its transaction around a lone last statement; named statements begin it on their own", async () => {
    const iso = sql`${sql.raw(LAST_STATEMENT)}SELECT current_setting(${"transaction_isolation"}) AS iso, now() = statement_timestamp() AS alone`;
    const [serializable] = await lazy.database.db.transaction((tx) => queryRows<{ iso: string; alone: boolean }>(tx, iso), { isolationLevel: "serializable" });
    expect(serializable).toEqual({ iso: "serializable", alone: false });
    const id = uid("named");
    const table = pgTable("lazy_user", { instanceId: text("instance_id").notNull(), n: integer("n").notNull() });
    await lazy.database.db.transaction(async (tx) => {
      await tx.insert(table).values({ instanceId: id, n: 1 }).prepare("lazy_user_named").execute();
      await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO lazy_user VALUES (${id}, ${2})`);
    });
    const rows = await queryRows<{ n: number }>(lazy.database.db, sql`SELECT n FROM lazy_user WHERE instance_id = ${id} ORDER BY n`);
    expect(rows.map((r) => r.n)).toEqual([1, 2]);
    expect(await openTransactions(lazy)).toBe(0);
  });

  it("a failed first statement rolls back; nothing runs after the last statement or the transaction's end; the pool still serves", async () => {
    const id = uid("after");
    const bad = lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, ${"not a number"})`);
    });
    expect(await failure(bad)).toMatch(/invalid input syntax/);
    const after = lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO lazy_user VALUES (${id}, 1)`);
      await tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, 2)`);
    });
    expect(await failure(after)).toMatch(/after the transaction's last statement/);
    // A failed lone statement fails its transaction, even when the callback swallowed the error.
    const swallowed = lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO lazy_user VALUES (${id}, 1)`).catch(() => undefined);
    });
    expect(await failure(swallowed)).toMatch(/duplicate key/);
    let leaked: Promise<unknown> = Promise.resolve();
    await lazy.database.db.transaction(async (tx) => {
      leaked = sleep(20).then(() => tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, 3)`));
    });
    expect(await failure(leaked)).toMatch(/has ended/);
    const left = await queryRows<{ n: number }>(lazy.database.db, sql`SELECT n FROM lazy_user WHERE instance_id = ${id} ORDER BY n`);
    expect(left.map((r) => r.n)).toEqual([1]);
    expect(await openTransactions(lazy)).toBe(0);
  });
});

describe("round trips of a Neon transaction (counted by a proxy in front of the WebSocket proxy)", () => {
  afterAll(() => useLocalNeonProxy());

  it("open connection: lone conclusion 1, write + conclusion 2; fresh client: 3 and 4; the envelope 3, 4, 5 and 6", async () => {
    useLocalNeonProxy();
    const url = await freshDatabase("neon_lazy_flights");
    const setup = createNeonDatabase({ url, max: 1 });
    await setup.db.execute(sql`CREATE TABLE flights (n int)`);
    await setup.close();
    const proxy = await startLatencyProxy(`postgres://ws@127.0.0.1:${inject("TEST_NEON_PROXY_PORT")}/`, 2, { trace: "websocket" });
    const last = sql`${sql.raw(LAST_STATEMENT)}INSERT INTO flights VALUES (${2})`;
    const write = async (tx: Database["db"], simple: boolean) => {
      await tx.execute(simple ? sql`INSERT INTO flights VALUES (1)` : sql`INSERT INTO flights VALUES (${1})`);
      await tx.execute(last);
    };
    const count = async (lazyTransactions: boolean) => {
      const open = () => createNeonDatabase({ url, max: 1, wsProxy: `127.0.0.1:${new URL(proxy.url).port}`, webSocketConstructor: WebSocket, lazyTransactions });
      const flights: number[] = [];
      const measure = async (db: Database, fn: (tx: Database["db"]) => Promise<unknown>, fresh = false) => {
        const before = proxy.connections();
        proxy.reset();
        await db.db.transaction((tx) => fn(tx as unknown as Database["db"]));
        // On a fresh client only its own connection's: the previous client's goodbye may still be crossing.
        flights.push(fresh ? proxy.flights().filter((f) => f.connection > before).length : proxy.roundTrips());
      };
      const warm = open();
      await warm.db.execute(sql`SELECT 1`);
      await measure(warm, (tx) => tx.execute(last));
      await measure(warm, (tx) => write(tx, false));
      await measure(warm, (tx) => write(tx, true));
      await warm.close();
      for (const fn of [(tx: Database["db"]) => tx.execute(last), (tx: Database["db"]) => write(tx, false)]) {
        const fresh = open();
        await measure(fresh, fn, true);
        await fresh.close();
      }
      return flights;
    };
    try {
      // Fresh: the WebSocket upgrade and the start-up come first (trust: no password to pipeline).
      expect(await count(true)).toEqual([1, 2, 2, 3, 4]);
      expect(await count(false)).toEqual([3, 4, 4, 5, 6]);
    } finally {
      await proxy.stop();
    }
    // createNeonDatabase({ wsProxy }) pointed the process's neonConfig at the stopped proxy.
    useLocalNeonProxy();
    const check = createNeonDatabase({ url, max: 1 });
    const [n] = await queryRows<{ n: number }>(check.db, sql`SELECT count(*)::int AS n FROM flights`);
    await check.close();
    // Each measured transaction committed: 1 + 2 + 2 + 1 + 2 rows per variant.
    expect(n!.n).toBe(16);
  });
});

describe("lazy Neon transactions under backend kills", () => {
  let side: Side;
  beforeAll(async () => {
    side = await open("neon_lazy_kills", true);
    // No keys: an effect written twice, or a body committed without its last statement, shows as an extra row.
    await side.database.db.execute(sql`CREATE TABLE kill_body (k int NOT NULL)`);
    await side.database.db.execute(sql`CREATE TABLE kill_last (k int NOT NULL)`);
  });
  afterAll(async () => {
    await side.database.close();
  });

  it("160 transactions while every backend is terminated 40 times: all settle, each effect once", { timeout: 240_000 }, async () => {
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
    // k % 3 = 0: a body statement, then the last one; 1: the same, the body by the simple protocol; 2: the last alone.
    const once = (k: number) =>
      side.database.db.transaction(async (tx) => {
        if (k % 3 !== 2) {
          await tx.execute(k % 3 === 0 ? sql`INSERT INTO kill_body (k) VALUES (${k})` : sql.raw(`INSERT INTO kill_body (k) VALUES (${k})`));
          await sleep(Math.floor(Math.random() * 10));
        }
        await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO kill_last (k) VALUES (${k})`);
      });
    const done = async (k: number) => (await queryRows(side.database.db, sql`SELECT 1 FROM kill_last WHERE k = ${k}`)).length > 0;
    const settled = await Promise.all(
      Array.from({ length: 160 }, async (_, k) => {
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
    while (rounds < 40) await sleep(20);
    stop = true;
    await killer;
    await admin.end();
    expect(settled.every(Boolean)).toBe(true);
    const body = await queryRows<{ k: number }>(side.database.db, sql`SELECT k FROM kill_body ORDER BY k`);
    const last = await queryRows<{ k: number }>(side.database.db, sql`SELECT k FROM kill_last ORDER BY k`);
    expect(last.map((r) => r.k)).toEqual(Array.from({ length: 160 }, (_, k) => k));
    // Each body committed with its last statement: never one without the other.
    expect(body.map((r) => r.k)).toEqual(Array.from({ length: 160 }, (_, k) => k).filter((k) => k % 3 !== 2));
    expect(rounds).toBe(40);
    expect(failures).toBeGreaterThan(0);
    expect(await openTransactions(side)).toBe(0);
    console.log(`lazy Neon transactions: 160 settled through 40 kill rounds, ${failures} attempts failed and were retried`);
  });
});
