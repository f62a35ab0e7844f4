/**
 * The `edda-edge` command line (Node): `edda-edge migrate [--url <postgres url>]`
 * applies the bundled migrations to DATABASE_URL (or --url) over TCP and says
 * what it did. Deployed Workers and Deno apps never migrate at request time;
 * run this once per release, before deploying. Safe to repeat and to run
 * concurrently (the migrator serializes on an advisory lock).
 */
import { createPostgresJsDatabase } from "../storage/drivers/postgres-js.ts";
import { migrate } from "../storage/migrate.ts";
import { readConfig } from "./env.ts";

const USAGE = `usage: edda-edge migrate [--url <postgres url>]
  Applies the Edda Edge migrations to the database in DATABASE_URL (or --url).`;

export async function main(argv: string[], env: Record<string, string | undefined>): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== "migrate") {
    console.error(command && command !== "--help" && command !== "-h" ? `unknown command "${command}"\n${USAGE}` : USAGE);
    return command === "--help" || command === "-h" ? 0 : 2;
  }
  const urlFlag = rest.indexOf("--url");
  const url = urlFlag >= 0 ? rest[urlFlag + 1] : readConfig(env).databaseUrl;
  if (!url) {
    console.error(`DATABASE_URL is not set\n${USAGE}`);
    return 2;
  }
  const database = createPostgresJsDatabase({ url, max: 1 });
  try {
    const r = await migrate(database.db);
    const where = describe(url);
    console.log(r.applied.length ? `${where}: applied migration(s) ${r.applied.join(", ")}; schema version ${r.current}` : `${where}: up to date (schema version ${r.current})`);
    return 0;
  } catch (err) {
    console.error(`migration failed: ${(err as Error).message}`);
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

process.exitCode = await main(process.argv.slice(2), process.env);
