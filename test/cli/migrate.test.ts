// `edda-edge migrate` (bin/edda-edge.mjs, a real process) against a real
// empty database: the schema is created once, a second run changes nothing,
// and a missing DATABASE_URL is a clear usage error.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { sql } from "drizzle-orm";
import { afterAll, expect, it } from "vitest";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { LATEST_SCHEMA_VERSION } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { ROOT } from "../runtime/processes.ts";

const run = (args: string[], env: Record<string, string | undefined>) =>
  promisify(execFile)(process.execPath, [join(ROOT, "bin", "edda-edge.mjs"), ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: undefined, ...env } }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

let db: Database | undefined;
afterAll(async () => db?.close());

it("edda-edge migrate applies the migrations to DATABASE_URL once; running it again changes nothing", { timeout: 60_000 }, async () => {
  const url = await freshDatabase("cli");
  const first = await run(["migrate"], { DATABASE_URL: url });
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toMatch(new RegExp(`applied migration\\(s\\) .*; schema version ${LATEST_SCHEMA_VERSION}`));
  expect(first.stdout).not.toContain("postgres@"); // no credentials in the output
  const second = await run(["migrate", "--database-url", url], {});
  expect(second.code, second.stderr).toBe(0);
  expect(second.stderr).toBe("");
  expect(second.stdout).toContain(`up to date (schema version ${LATEST_SCHEMA_VERSION})`);
  db = createPostgresJsDatabase({ url, max: 1 });
  const versions = await queryRows<{ version: number }>(db.db, sql`SELECT version FROM schema_version ORDER BY version`);
  expect(versions.map((v) => Number(v.version))).toEqual(Array.from({ length: LATEST_SCHEMA_VERSION }, (_, i) => i + 1));
});

it("edda-edge migrate --json reports what it applied, for scripts", { timeout: 60_000 }, async () => {
  const url = await freshDatabase("cli_json");
  const r = await run(["migrate", "--json"], { DATABASE_URL: url });
  expect(r.code, r.stderr).toBe(0);
  expect(JSON.parse(r.stdout)).toEqual({ database: expect.stringMatching(/cli_json/) as unknown, applied: Array.from({ length: LATEST_SCHEMA_VERSION }, (_, i) => i + 1), schemaVersion: LATEST_SCHEMA_VERSION });
});

it("edda-edge migrate against an unreachable database exits 1 and says why", { timeout: 60_000 }, async () => {
  // --url still names the database here, as a deprecated alias that says so.
  const r = await run(["migrate", "--url", "postgres://nobody@127.0.0.1:1/none"], {});
  expect(r.code).toBe(1);
  expect(r.stderr).toContain("migration failed");
  expect(r.stderr).toContain("--url is deprecated here");
});

it("edda-edge without DATABASE_URL, or with an unknown command, exits 2 with the usage", { timeout: 60_000 }, async () => {
  const noUrl = await run(["migrate"], {});
  expect(noUrl.code).toBe(2);
  expect(noUrl.stderr).toContain("DATABASE_URL is not set");
  const unknown = await run(["frobnicate"], {});
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('unknown command "frobnicate"');
  expect(unknown.stderr).toContain("usage: edda-edge <command>");
});
