// The migrator on real Postgres: several processes migrating a fresh database
// at once serialize on the advisory lock (each migration applied exactly once),
// and an upgrade applies only what is new without losing rows.
import { sql } from "drizzle-orm";
import { afterAll, expect, it } from "vitest";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { applyMigrations, migrate } from "../../src/storage/migrate.ts";
import { MIGRATIONS } from "../../src/storage/migrations.gen.ts";
import { leasesArea, type StepConclusion } from "../../src/storage/leases.ts";
import { createStorage } from "../../src/storage/pg-storage.ts";
import { freshDatabase } from "../support/db.ts";

const opened: Database[] = [];
const open = (url: string) => {
  const d = createPostgresJsDatabase({ url, max: 2 });
  opened.push(d);
  return d;
};
afterAll(async () => {
  await Promise.all(opened.map((d) => d.close()));
});

it("four migrators racing on a fresh database apply each migration exactly once", async () => {
  const url = await freshDatabase("migrate_race");
  const results = await Promise.all([1, 2, 3, 4].map(() => migrate(open(url).db)));
  expect(results.flatMap((r) => r.applied).sort()).toEqual(MIGRATIONS.map((m) => m.version).sort());
  expect(results.every((r) => r.current === MIGRATIONS.at(-1)!.version)).toBe(true);
  const rows = await queryRows<{ version: number }>(opened[0]!.db, sql`SELECT version FROM schema_version ORDER BY version`);
  expect(rows.map((r) => Number(r.version))).toEqual(MIGRATIONS.map((m) => m.version));
});

it("an upgrade applies only the new migration and keeps every row", async () => {
  const url = await freshDatabase("migrate_upgrade");
  const db = open(url);
  await migrate(db.db);
  const storage = createStorage(db);
  await storage.upsertWorkflowDefinition("wf", "h".repeat(64), "src");
  await storage.createInstance({ instanceId: "keep-me", workflowName: "wf", sourceHash: "h".repeat(64), ownerService: "t", inputData: '{"x":1}' });
  const next = { version: MIGRATIONS.at(-1)!.version + 1, tag: "test_extra_column", statements: ["ALTER TABLE workflow_instances ADD COLUMN test_extra text"] };
  const r = await applyMigrations(db.db, [...MIGRATIONS, next]);
  expect(r.applied).toEqual([next.version]);
  expect((await storage.getInstance("keep-me"))?.inputData).toBe('{"x":1}');
  expect((await applyMigrations(db.db, [...MIGRATIONS, next])).applied).toEqual([]);
});

// Migrations 0013, 0015 and 0016 kept drizzle-kit's random names until they were renamed
// (0013_soft_ted_forrester → 0013_cloudevent_dedupe_outcome, …): a database that
// recorded the old names must not apply them again. The migrator keys by version.
it("a database migrated under a migration's old name applies nothing again after the rename", async () => {
  const url = await freshDatabase("migrate_renamed");
  const db = open(url);
  await migrate(db.db);
  await db.db.execute(sql`UPDATE schema_version SET description = 'old_' || description`);
  const renamed = MIGRATIONS.map((m) => ({ ...m, tag: `${m.tag}_renamed` }));
  expect((await applyMigrations(db.db, renamed)).applied).toEqual([]);
  expect((await migrate(db.db)).applied).toEqual([]);
});

it("the quarantine migration keeps every instance of every earlier status and starts their failure counts at 0", async () => {
  const url = await freshDatabase("migrate_quarantine");
  const db = open(url);
  const mine = MIGRATIONS.findIndex((m) => m.tag.endsWith("_instance_quarantine"));
  await applyMigrations(db.db, MIGRATIONS.slice(0, mine));
  await db.db.execute(sql`INSERT INTO workflow_definitions (workflow_name, source_hash, source_code) VALUES ('wf', ${"h".repeat(64)}, 'src')`);
  const statuses = ["running", "waiting_for_timer", "waiting_for_message", "compensating", "completed", "failed", "cancelled"];
  for (const s of statuses) {
    await db.db.execute(sql`INSERT INTO workflow_instances (instance_id, workflow_name, source_hash, owner_service, status, input_data)
                            VALUES (${`old-${s}`}, 'wf', ${"h".repeat(64)}, 't', ${s}, '{"kept":true}')`);
  }
  const r = await migrate(db.db);
  expect(r.applied).toContain(MIGRATIONS[mine]!.version);
  const storage = createStorage(db);
  for (const s of statuses) {
    const inst = await storage.getInstance(`old-${s}`);
    expect(inst).toMatchObject({ status: s, inputData: '{"kept":true}', failureCount: 0, failureData: null });
  }
  await storage.recordInstanceFailure("old-running", { task: "step", errorType: "E", message: "m", maxFailures: 1 });
  expect((await storage.getInstance("old-running"))?.status).toBe("quarantined");
});

it("the instance-index migration keeps every row, leaves 13 indexes none of which names a per-step column, and a lease handed on is updated HOT", async () => {
  const url = await freshDatabase("migrate_hot_updates");
  const db = open(url);
  const mine = MIGRATIONS.findIndex((m) => m.tag.endsWith("_instances_hot_updates"));
  await applyMigrations(db.db, MIGRATIONS.slice(0, mine));
  await db.db.execute(sql`INSERT INTO workflow_definitions (workflow_name, source_hash, source_code) VALUES ('wf', ${"h".repeat(64)}, 'src')`);
  const statuses = ["running", "waiting_for_timer", "waiting_for_message", "waiting_for_child", "compensating", "completed", "failed", "cancelled", "parked", "quarantined", "queued"];
  for (const s of statuses) {
    await db.db.execute(sql`INSERT INTO workflow_instances (instance_id, workflow_name, source_hash, owner_service, status, input_data)
                            VALUES (${`old-${s}`}, 'wf', ${"h".repeat(64)}, 't', ${s}, ${JSON.stringify({ kept: s })})`);
  }
  // A lease that expired before the upgrade: the sweeper must still find it through the new index.
  await db.db.execute(sql`INSERT INTO workflow_instances (instance_id, workflow_name, source_hash, owner_service, input_data, locked_by, locked_at, lock_token, lock_expires_at)
                          VALUES ('old-stale', 'wf', ${"h".repeat(64)}, 't', '{}', 'gone', now() - interval '1 hour', 3, now() - interval '1 minute')`);
  const r = await migrate(db.db);
  expect(r.applied).toContain(MIGRATIONS[mine]!.version);

  const storage = createStorage(db);
  for (const s of statuses) expect(await storage.getInstance(`old-${s}`)).toMatchObject({ status: s, inputData: JSON.stringify({ kept: s }) });
  const indexes = await queryRows<{ indexdef: string }>(db.db, sql`SELECT indexdef FROM pg_indexes WHERE tablename = 'workflow_instances'`);
  expect(indexes).toHaveLength(13);
  for (const { indexdef } of indexes) expect(indexdef).not.toMatch(/lock_expires_at|locked_at|lock_token|current_activity_id|failure_/);
  const [opts] = await queryRows<{ o: string[] }>(db.db, sql`SELECT reloptions AS o FROM pg_class WHERE relname = 'workflow_instances'`);
  expect(opts!.o).toEqual(["fillfactor=80"]);
  expect(await storage.releaseStaleLeases(10)).toEqual(["old-stale"]);

  // This backend's counters (pg_stat_get_xact_*: not yet flushed, so read on one connection around the statement).
  const lease = (await storage.acquireLease("old-running", "w", 30))!;
  const conclude = (fence: typeof lease.fence, c: StepConclusion) =>
    db.db.transaction(async (tx) => {
      const counts = async () => {
        const [n] = await queryRows<{ upd: string; hot: string }>(
          tx,
          sql`SELECT pg_stat_get_xact_tuples_updated('workflow_instances'::regclass)::text AS upd, pg_stat_get_xact_tuples_hot_updated('workflow_instances'::regclass)::text AS hot`,
        );
        return { upd: Number(n!.upd), hot: Number(n!.hot) };
      };
      const c0 = await counts();
      const res = await leasesArea(tx).concludeStep(fence, c);
      const c1 = await counts();
      return { res, upd: c1.upd - c0.upd, hot: c1.hot - c0.hot };
    });
  const before = (await storage.getInstance("old-running"))!.updatedAt;
  const handedOn = await conclude(lease.fence, { status: "running", currentActivityId: "a:1", handoff: { leaseSeconds: 30 } });
  expect(handedOn).toMatchObject({ res: { ok: true }, upd: 1, hot: 1 });
  // updated_at stays for HOT's sake; the reported updatedAt moves with the lease.
  expect((await storage.getInstance("old-running"))!.updatedAt.getTime()).toBeGreaterThanOrEqual(before.getTime());
  const finished = await conclude({ ...lease.fence, token: handedOn.res.token! }, { status: "completed", outputData: "1" });
  expect(finished).toMatchObject({ res: { ok: true }, upd: 1, hot: 0 });
  expect(await storage.getInstance("old-running")).toMatchObject({ status: "completed", outputData: "1", lockedBy: null });
});
