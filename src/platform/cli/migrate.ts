/**
 * `edda-edge migrate [--url <postgres url>]`: applies the bundled migrations
 * to DATABASE_URL (or --url) over TCP and says what it did. Deployed Workers
 * and Deno apps never migrate at request time; run this once per release,
 * before deploying. Safe to repeat and to run concurrently (the migrator
 * serializes on an advisory lock).
 */
import { createPostgresJsDatabase } from "../../storage/drivers/postgres-js.ts";
import { migrate } from "../../storage/migrate.ts";
import { readConfig } from "../env.ts";
import { DATABASE_URL_OPTIONS, databaseUrl, parseCommand, UsageError, type Io } from "./args.ts";

export const MIGRATE_USAGE = `usage: edda-edge migrate [--database-url <postgres url>] [--json]
  Applies the Edda Edge migrations to the database in DATABASE_URL (or --database-url; --url is a deprecated alias).`;

export async function migrateCommand(argv: string[], env: Record<string, string | undefined>, io: Io): Promise<number> {
  const { values, help } = parseCommand(argv, { ...DATABASE_URL_OPTIONS, json: { type: "boolean" } }, MIGRATE_USAGE, io);
  if (help) return 0;
  const url = databaseUrl(values, readConfig(env).databaseUrl, io);
  if (!url) throw new UsageError("DATABASE_URL is not set (or pass --database-url)", MIGRATE_USAGE);
  const database = createPostgresJsDatabase({ url, max: 1 });
  try {
    const r = await migrate(database.db);
    const where = describe(url);
    if (values.json) io.out(JSON.stringify({ database: where, applied: r.applied, schemaVersion: r.current }));
    else io.out(r.applied.length ? `${where}: applied migration(s) ${r.applied.join(", ")}; schema version ${r.current}` : `${where}: up to date (schema version ${r.current})`);
    return 0;
  } catch (err) {
    io.err(`migration failed: ${(err as Error).message}`);
    return 1;
  } finally {
    await database.close();
  }
}

/** host/database, without credentials. */
function describe(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}${u.port ? `:${u.port}` : ""}${u.pathname}`;
  } catch {
    return "database";
  }
}
