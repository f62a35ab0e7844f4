// What every driver's lazy transactions are held to (postgres-js-lazy-tx.test.ts,
// neon-lazy-tx.test.ts): generated step conclusions leave the same stored state
// as the BEGIN … COMMIT envelope, and 160 transactions settle, each effect
// once, while every backend is terminated 40 times. Each driver's file opens
// its own sides and adds what only it has (its flights, its protocols).
import fc from "fast-check";
import postgres from "postgres";
import { sql, type SQL } from "drizzle-orm";
import { expect } from "vitest";
import { LAST_STATEMENT, queryRows, type Database } from "../../src/storage/database.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import type { Fence, StepConclusion, Storage } from "../../src/storage/types.ts";
import { newInstance, sleep, SOURCE_HASH, uid, WORKFLOW } from "./cases/helpers.ts";

export interface Side {
  url: string;
  database: Database;
  storage: Storage;
}

/** A migrated database with the activities' own table and the workflow's definition. */
export async function prepareSide(url: string, database: Database): Promise<Side> {
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

/** One step's case; with `simpleWrites`, the activity's first write may go by the simple protocol (no parameters). */
export function caseArb(opts: { simpleWrites: boolean }) {
  return fc.record({
    stale: fc.boolean(),
    bodyWrites: fc.integer({ min: 0, max: 2 }),
    ...(opts.simpleWrites ? { simpleWrite: fc.boolean() } : {}),
    bodyFails: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
    status: fc.constantFrom("running", "waiting_for_timer", "completed", "failed") as fc.Arbitrary<StepConclusion["status"]>,
    history: historyArb,
    timer: fc.option(fc.integer({ min: 0, max: 3600 }), { nil: undefined }),
    handoff: fc.boolean(),
    output: fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
  });
}
type Case = ReturnType<typeof caseArb> extends fc.Arbitrary<infer T> ? T : never;

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

/** The property: each generated step leaves the same state on both sides, and all of the step or none of it. */
export async function expectSameAsEnvelope(lazy: Side, envelope: Side, cases: ReturnType<typeof caseArb>): Promise<void> {
  let committed = 0;
  let alone = 0;
  await fc.assert(
    fc.asyncProperty(cases, async (c) => {
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
}

/** The tables the kill rounds write: no keys, so an effect written twice, or a body committed without its last statement, shows as an extra row. */
export async function createKillTables(side: Side): Promise<void> {
  await side.database.db.execute(sql`CREATE TABLE kill_body (k int NOT NULL)`);
  await side.database.db.execute(sql`CREATE TABLE kill_last (k int NOT NULL)`);
}

/**
 * 160 transactions while every backend of the database is terminated 40
 * times. Transaction k runs `bodyOf(k)` (when it has one) and then its last
 * statement; a failed attempt is retried until it settles. Returns how many
 * attempts failed (more than none: the kills hit).
 */
export async function expectKillRoundsSettle(side: Side, bodyOf: (k: number) => SQL | null): Promise<number> {
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
  const once = (k: number) =>
    side.database.db.transaction(async (tx) => {
      const body = bodyOf(k);
      if (body) {
        await tx.execute(body);
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
  const all = Array.from({ length: 160 }, (_, k) => k);
  expect(last.map((r) => r.k)).toEqual(all);
  // Each body committed with its last statement: never one without the other.
  expect(body.map((r) => r.k)).toEqual(all.filter((k) => bodyOf(k) !== null));
  expect(rounds).toBe(40);
  expect(failures).toBeGreaterThan(0);
  return failures;
}
