// Group commit (engine/group-commit.ts over storage concludeSteps) against one statement per step: for
// generated mixes of steps — fences that hold, were released, or were taken by another worker; every
// conclusion shape (history rows, JSON and bytes, compensations, timers, hand-off, terminal clean-up,
// optional columns); now and then a history row the instance already has, which fails the grouped
// statement and sends it one by one — the grouped side and the one-by-one side leave the same instance
// rows, history, timers, compensations, subscriptions and groups, and each step gets the same outcome.
import fc from "fast-check";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupCommit } from "../../src/engine/group-commit.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import type { ConcludeResult, Fence, StepConclusion, Storage } from "../../src/storage/types.ts";
import { freshDatabase } from "../support/db.ts";
import { json, newInstance, SOURCE_HASH, uid, WORKFLOW } from "./cases/helpers.ts";

const FIXED = new Date("2031-05-06T07:08:09.123Z");

const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(fc.option(arb, { nil: null }), { nil: undefined });

const stepArb = fc.record({
  fence: fc.constantFrom("holds", "holds", "holds", "released", "taken"),
  status: fc.constantFrom("running", "running", "waiting_for_timer", "waiting_for_message", "completed", "failed", "parked") as fc.Arbitrary<StepConclusion["status"]>,
  history: fc.array(fc.record({ binary: fc.boolean(), value: fc.jsonValue({ maxDepth: 2 }) }), { maxLength: 3 }),
  // Now and then the conclusion records an activity id the instance already has: its statement fails.
  conflict: fc.integer({ min: 0, max: 11 }).map((n) => n === 0),
  compensations: fc.integer({ min: 0, max: 2 }),
  timer: fc.constantFrom("none", "none", "delay", "absolute"),
  handoff: fc.boolean(),
  current: optional(fc.string({ maxLength: 8 })),
  output: optional(fc.jsonValue({ maxDepth: 1 }).map((v) => JSON.stringify(v ?? null))),
  error: optional(fc.constant('{"error_type":"Error","error_message":"boom"}')),
  parked: optional(fc.constant("b".repeat(64))),
  // A subscription, a group and a timer registered before: a terminal status leaves them, a timer keeps its first expiry.
  extras: fc.boolean(),
});
type StepCase = typeof stepArb extends fc.Arbitrary<infer T> ? T : never;

function conclusionOf(s: StepCase): StepConclusion {
  const history = s.history.map((h, k) => ({
    activityId: `h:${k}`,
    eventType: "ActivityCompleted",
    data: h.binary ? { type: "binary" as const, bytes: new TextEncoder().encode(JSON.stringify(h.value ?? null)) } : json(h.value ?? null),
  }));
  if (s.conflict) history.push({ activityId: "pre:1", eventType: "ActivityCompleted", data: json("again") });
  return {
    status: s.status,
    history,
    compensations: Array.from({ length: s.compensations }, (_, k) => ({ activityId: `c:${k}`, activityName: `undo_${k}`, args: JSON.stringify([k]) })),
    ...(s.timer === "delay" ? { timer: { timerId: "t", activityId: "t:1", delaySeconds: 7200 } } : {}),
    ...(s.timer === "absolute" ? { timer: { timerId: "t", activityId: "t:1", expiresAt: FIXED } } : {}),
    ...(s.handoff ? { handoff: { leaseSeconds: 600 } } : {}),
    ...(s.current !== undefined ? { currentActivityId: s.current } : {}),
    ...(s.output !== undefined ? { outputData: s.output } : {}),
    ...(s.error !== undefined ? { errorData: s.error } : {}),
    ...(s.parked !== undefined ? { parkedHash: s.parked } : {}),
  };
}

interface Prepared {
  instanceId: string;
  fence: Fence;
  before: { token: number; updatedAt: string };
}

/** An instance as the step found it: leased by "w", then perhaps released or taken by another worker. */
async function prepare(storage: Storage, instanceId: string, s: StepCase): Promise<Prepared> {
  await newInstance(storage, { instanceId });
  if (s.conflict) await storage.appendHistory(instanceId, [{ activityId: "pre:1", eventType: "ActivityCompleted", data: json("first") }]);
  if (s.extras) {
    await storage.subscribe(instanceId, `ch-${instanceId}`, "broadcast");
    await storage.joinGroup(instanceId, `g-${instanceId}`);
    await storage.registerTimer(instanceId, { timerId: "t", activityId: "t:1", delaySeconds: 3600 });
  }
  const lease = (await storage.acquireLease(instanceId, "w", 30))!;
  if (s.fence !== "holds") await storage.releaseLease(lease.fence);
  if (s.fence === "taken") await storage.acquireLease(instanceId, "other", 30);
  const [row] = await queryRows<{ lock_token: unknown; updated_at: string }>(
    storage.executor,
    sql`SELECT lock_token, updated_at::text AS updated_at FROM workflow_instances WHERE instance_id = ${instanceId}`,
  );
  return { instanceId, fence: lease.fence, before: { token: Number(row!.lock_token), updatedAt: row!.updated_at } };
}

type Outcome = { ok: boolean; tokenDelta?: number } | { error: true };

function outcomeOf(p: Prepared, r: PromiseSettledResult<ConcludeResult>): Outcome {
  if (r.status === "rejected") return { error: true };
  return r.value.token === undefined ? { ok: r.value.ok } : { ok: r.value.ok, tokenDelta: r.value.token - p.before.token };
}

/** What the conclusion left, without ids and clock readings (relative where they depend on the statement's time). */
async function stateOf(database: Database, p: Prepared) {
  const id = p.instanceId;
  const [inst] = await queryRows<Record<string, unknown>>(
    database.db,
    sql`SELECT status, current_activity_id, output_data, error_data, parked_hash, locked_by, lock_token, failure_count, failure_data,
               locked_at IS NULL AS unlocked_at, round(extract(epoch FROM lock_expires_at - now()) / 60) AS lease_minutes,
               updated_at::text = ${p.before.updatedAt} AS updated_kept
        FROM workflow_instances WHERE instance_id = ${id}`,
  );
  const history = await queryRows(
    database.db,
    sql`SELECT activity_id, event_type, data_type, event_data, encode(event_data_binary, 'hex') AS bytes FROM workflow_history WHERE instance_id = ${id} ORDER BY id`,
  );
  const timers = await queryRows<{ timer_id: string; activity_id: string; expires: string }>(
    database.db,
    sql`SELECT timer_id, activity_id, CASE WHEN expires_at = ${FIXED.toISOString()}::timestamptz THEN 'fixed' ELSE round(extract(epoch FROM expires_at - now()) / 60)::text END AS expires
        FROM workflow_timer_subscriptions WHERE instance_id = ${id} ORDER BY timer_id`,
  );
  const compensations = await queryRows(database.db, sql`SELECT activity_id, activity_name, args FROM workflow_compensations WHERE instance_id = ${id} ORDER BY activity_id`);
  const [left] = await queryRows(
    database.db,
    sql`SELECT (SELECT count(*)::int FROM channel_subscriptions WHERE instance_id = ${id}) AS subscriptions,
               (SELECT count(*)::int FROM workflow_group_memberships WHERE instance_id = ${id}) AS groups`,
  );
  return { instance: { ...inst, lock_token: Number(inst!.lock_token) - p.before.token }, history, timers, compensations, left };
}

describe.each(["prepared", "inline"] as const)("group commit ≡ one statement per step (%s statements)", (mode) => {
  let database: Database;
  let storage: Storage;
  beforeAll(async () => {
    database = createPostgresJsDatabase({ url: await freshDatabase(`group_commit_${mode}`), max: 10, prepare: mode === "prepared" });
    await migrate(database.db);
    storage = createStorage(database);
    await storage.upsertWorkflowDefinition(WORKFLOW, SOURCE_HASH, "async function contract() {}");
  });
  afterAll(async () => {
    await database.close();
  });

  it("generated mixes of fences and conclusion shapes leave the same stored state and the same outcome per step", { timeout: 240_000 }, async () => {
    const group = new GroupCommit(storage);
    let held = 0;
    let lost = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 8 }), async (steps) => {
        const base = uid("gc");
        const grouped = await Promise.all(steps.map((s, i) => prepare(storage, `${base}-${i}-g`, s)));
        const single = await Promise.all(steps.map((s, i) => prepare(storage, `${base}-${i}-s`, s)));
        // Every grouped conclusion queued in the same turn: one flush, one statement (or one by one after an error).
        const a = await Promise.allSettled(grouped.map((p, i) => group.conclude(p.fence, conclusionOf(steps[i]!))));
        const b: PromiseSettledResult<ConcludeResult>[] = [];
        for (const [i, p] of single.entries()) b.push(...(await Promise.allSettled([storage.concludeStep(p.fence, conclusionOf(steps[i]!))])));
        for (const [i, s] of steps.entries()) {
          const [ga, sb] = [outcomeOf(grouped[i]!, a[i]!), outcomeOf(single[i]!, b[i]!)];
          expect(ga, `step ${i} outcome`).toEqual(sb);
          expect(await stateOf(database, grouped[i]!), `step ${i} state`).toEqual(await stateOf(database, single[i]!));
          // And the outcome is the fence's: written where it held, nothing elsewhere; a conflict fails only a step that held.
          expect("error" in ga ? "error" : ga.ok).toBe(s.conflict && s.fence === "holds" ? "error" : s.fence === "holds");
          if ("ok" in ga && ga.ok) held++;
          if ("ok" in ga && !ga.ok) lost++;
        }
      }),
      { numRuns: 80, seed: 20261202 },
    );
    // The runs wrote through grouped statements, with fences that held and failed side by side, and fell back.
    expect(group.stats.conclusions).toBeGreaterThan(group.stats.statements);
    expect(group.stats.fallbacks).toBeGreaterThan(0);
    expect(held).toBeGreaterThan(50);
    expect(lost).toBeGreaterThan(20);
  });
});
