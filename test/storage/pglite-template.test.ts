// PGlite's pre-initialised template (pglite-template.ts), on real PGlite in
// real folders: the first fresh data folder runs initdb and leaves a template
// taken before any migration or data; a second fresh folder is a copy of it
// (no initdb), migrates and serves queries, and holds none of the first
// folder's rows; a folder that already holds a database is opened as it is.
// A template that cannot be used (no PG_VERSION) means initdb, not a failure.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, expect, it } from "vitest";
import { queryRows } from "../../src/storage/database.ts";
import { createPgliteDatabase } from "../../src/storage/drivers/pglite.ts";
import { templateFolder } from "../../src/storage/drivers/pglite-template.ts";
import { migrate } from "../../src/storage/migrate.ts";

const root = mkdtempSync(join(tmpdir(), "edda-pglite-template-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const count = async (db: Awaited<ReturnType<typeof createPgliteDatabase>>) =>
  (await queryRows<{ n: number }>(db.db, sql`SELECT count(*)::int AS n FROM workflow_definitions`))[0]!.n;

it("the first fresh folder leaves a template; a second fresh folder is copied from it, migrates and holds no rows of the first", { timeout: 240_000 }, async () => {
  const cache = join(root, "cache");
  const template = templateFolder(cache)!;
  expect(template).toMatch(/pglite-\d+\.\d+\.\d+/);

  const first = await createPgliteDatabase({ dataDir: join(root, "a"), templateCache: cache });
  expect(existsSync(join(template, "PG_VERSION"))).toBe(true);
  expect(readdirSync(cache).filter((f) => f.includes(".partial-"))).toEqual([]);
  await migrate(first.db);
  await first.db.execute(sql`INSERT INTO workflow_definitions (workflow_name, source_hash, source_code) VALUES ('from-a', 'h', 'code')`);
  expect(await count(first)).toBe(1);
  await first.close();

  // A marker in the template shows the second folder was copied from it rather than made by initdb.
  writeFileSync(join(template, "edda-template-marker"), "");
  const second = await createPgliteDatabase({ dataDir: join(root, "b"), templateCache: cache });
  expect(existsSync(join(root, "b", "edda-template-marker"))).toBe(true);
  await migrate(second.db);
  expect(await count(second)).toBe(0);
  await second.close();

  // An existing database is opened, not replaced: the first folder still has its row.
  const again = await createPgliteDatabase({ dataDir: join(root, "a"), templateCache: cache });
  expect(existsSync(join(root, "a", "edda-template-marker"))).toBe(false);
  expect(await count(again)).toBe(1);
  await again.close();
});

it("a template without PG_VERSION is not used: the fresh folder runs initdb and works", { timeout: 240_000 }, async () => {
  const cache = join(root, "broken-cache");
  const template = templateFolder(cache)!;
  mkdirSync(template, { recursive: true });
  writeFileSync(join(template, "stray"), "");
  const db = await createPgliteDatabase({ dataDir: join(root, "c"), templateCache: cache });
  expect(existsSync(join(root, "c", "stray"))).toBe(false);
  await migrate(db.db);
  expect(await count(db)).toBe(0);
  await db.close();
});
