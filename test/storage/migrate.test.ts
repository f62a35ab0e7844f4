// The migrator on real Postgres: several processes migrating a fresh database
// at once serialize on the advisory lock (each migration applied exactly once),
// and an upgrade applies only what is new without losing rows.
import { sql } from "drizzle-orm";
import { afterAll, expect, it } from "vitest";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { applyMigrations, migrate } from "../../src/storage/migrate.ts";
import { MIGRATIONS } from "../../src/storage/migrations.gen.ts";
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
