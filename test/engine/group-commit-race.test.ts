// Three engines, each with its own pool and group commit, race on the same instances: every follow-up is
// offered to the engine that holds the lease and to another one, and a stealer keeps expiring leases in
// the database so that another engine takes them over while the holder's step still runs. The holder's
// conclusion then fails its fence — inside a grouped statement with other steps' rows — and only that
// step learns its lease was lost. Every instance must complete with its whole history once, in order, and
// each transactional activity's row written once.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { createEdda, engineOf, type Edda } from "../../src/edda.ts";
import type { Dispatcher, StepRequest, StepRunner } from "../../src/engine/dispatcher.ts";
import type { Engine } from "../../src/engine/engine.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { freshPostgres } from "../support/engine.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const jitter = () => sleep(Math.random() < 0.5 ? 0 : Math.floor(Math.random() * 40));

const lone = activity("gcr_lone", async (_ctx, n: number) => (await jitter(), n), { transactional: false });
const txNoop = activity("gcr_tx_noop", async (_ctx, n: number) => (await jitter(), n));
const txWrite = activity("gcr_tx_write", async (ctx, n: number) => {
  await ctx.tx.execute(sql`INSERT INTO gcr_rows (instance_id, n) VALUES (${ctx.instanceId}, ${n})`);
  await jitter();
  return n;
});
const STEPS = 9;
const raceFlow = workflow("gcr_flow", async (ctx) => {
  let sum = 0;
  for (let i = 1; i <= STEPS; i++) sum += await [lone, txNoop, txWrite][i % 3]!(ctx, i);
  return sum;
});

/** Runs every follow-up at once on its engine, and offers it to one more engine without the lease. */
class RaceDispatcher implements Dispatcher {
  runner: StepRunner | null = null;
  peers: RaceDispatcher[] = [];
  readonly outcomes = new Map<string, number>();
  attach(runner: StepRunner): void {
    this.runner ??= runner;
  }
  dispatch(req: StepRequest): void {
    this.run(req);
    this.peers[Math.floor(Math.random() * this.peers.length)]!.run({ instanceId: req.instanceId });
  }
  run(req: StepRequest): void {
    void this.runner!.runStep(req).then(
      (r) => this.count((r as { status: string }).status),
      () => this.count("error"),
    );
  }
  private count(k: string) {
    this.outcomes.set(k, (this.outcomes.get(k) ?? 0) + 1);
  }
}

let admin: Database;
const apps: { edda: Edda; database: Database; dispatcher: RaceDispatcher; engine: Engine }[] = [];

beforeAll(async () => {
  const pg = await freshPostgres("group_commit_race");
  admin = pg.open();
  await admin.db.execute(sql`CREATE TABLE gcr_rows (instance_id text NOT NULL, n int NOT NULL)`);
  for (let i = 0; i < 3; i++) {
    const database = pg.open();
    const dispatcher = new RaceDispatcher();
    const edda = createEdda({ workflows: [raceFlow], database, dispatcher, serviceName: `gcr-${i}`, groupCommit: { maxBatch: 16 } });
    apps.push({ edda, database, dispatcher, engine: await engineOf(edda) });
  }
  for (const a of apps) a.dispatcher.peers = apps.filter((b) => b !== a).map((b) => b.dispatcher);
});

afterAll(async () => {
  for (const a of apps) {
    await a.edda.close();
    await a.database.close();
  }
  await admin?.close();
});

it("60 instances raced by 3 engines with leases stolen: each completes with its history once, no effect twice", { timeout: 120_000 }, async () => {
  const ids: string[] = [];
  for (let i = 0; i < 60; i++) ids.push((await apps[i % 3]!.edda.start(raceFlow, undefined)).instanceId);
  let steals = 0;
  let done = false;
  const stealer = (async () => {
    while (!done) {
      await sleep(15);
      // A held lease "expires" now: the next engine offered the instance takes it over, token + 1.
      const stolen = await queryRows<{ instance_id: string }>(
        admin.db,
        sql`UPDATE workflow_instances SET lock_expires_at = now() - interval '1 second'
            WHERE instance_id IN (SELECT instance_id FROM workflow_instances WHERE workflow_name = 'gcr_flow' AND locked_by IS NOT NULL ORDER BY random() LIMIT 3)
            RETURNING instance_id`,
      );
      for (const r of stolen) apps[Math.floor(Math.random() * 3)]!.dispatcher.run({ instanceId: r.instance_id });
      steals += stolen.length;
    }
  })();
  const deadline = Date.now() + 90_000;
  let left = ids.length;
  while (Date.now() < deadline) {
    const [r] = await queryRows<{ n: number }>(admin.db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'gcr_flow' AND status <> 'completed'`);
    left = Number(r!.n);
    if (left === 0) break;
    // What no follow-up reaches any more (its lease ran out under a steal that found it done) is offered again.
    const idle = await queryRows<{ instance_id: string }>(
      admin.db,
      sql`SELECT instance_id FROM workflow_instances WHERE workflow_name = 'gcr_flow' AND status = 'running' AND (locked_by IS NULL OR lock_expires_at < now())`,
    );
    for (const row of idle) apps[Math.floor(Math.random() * 3)]!.dispatcher.run({ instanceId: row.instance_id });
    await sleep(100);
  }
  done = true;
  await stealer;
  expect(left).toBe(0);

  // Activity ids count per name: gcr_tx_noop:1, gcr_tx_write:1, gcr_lone:1, gcr_tx_noop:2 …
  const expected = Array.from({ length: STEPS }, (_, k) => `${["gcr_lone", "gcr_tx_noop", "gcr_tx_write"][(k + 1) % 3]}:${Math.floor(k / 3) + 1}`);
  for (const id of ids) {
    const inst = (await apps[0]!.edda.getInstance(id, { history: true }))!;
    expect(inst.status).toBe("completed");
    expect(inst.output).toBe((STEPS * (STEPS + 1)) / 2);
    const completed = (inst.history ?? []).filter((h) => h.eventType === "ActivityCompleted").map((h) => h.activityId);
    expect(completed, id).toEqual(expected);
  }
  const rows = await queryRows<{ instance_id: string; n: number; k: number }>(admin.db, sql`SELECT instance_id, n, count(*)::int AS k FROM gcr_rows GROUP BY 1, 2`);
  expect(rows.every((r) => r.k === 1)).toBe(true);
  expect(rows.length).toBe(ids.length * Math.floor(STEPS / 3));

  const stats = apps.map((a) => a.engine.groupCommit!.stats);
  const outcomes = apps.map((a) => Object.fromEntries(a.dispatcher.outcomes));
  console.log(`group commit race: ${steals} leases stolen; per engine`, stats, outcomes);
  expect(steals).toBeGreaterThan(20);
  // Steps lost their lease, and conclusions went grouped: several per statement.
  expect(outcomes.reduce((n, o) => n + (o.lease_lost ?? 0), 0)).toBeGreaterThan(0);
  expect(stats.reduce((n, s) => n + s.conclusions, 0)).toBeGreaterThan(stats.reduce((n, s) => n + s.statements, 0));
  expect(outcomes.reduce((n, o) => n + (o.error ?? 0), 0)).toBe(0);
});
