/**
 * EXPERIMENT, not what Edda Edge ships: a postgres.js database whose drizzle
 * queries run as named prepared statements. drizzle's `db.execute(sql)` passes
 * `prepare: false` to postgres.js (`unsafe()`), so Postgres parses and plans
 * every storage statement on every call; forcing `prepare: true` lets each
 * connection parse once and reuse plans. The bench measures this variant next
 * to the shipped driver to size the proposed change to
 * src/storage/drivers/postgres-js.ts.
 */
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { countingLogger, type Database, type Db, type QueryStats } from "../../src/storage/database.ts";

type Client = ReturnType<typeof postgres>;

/** The client, with `unsafe` always preparing, also inside transactions and savepoints. */
function preparing(client: Client): Client {
  return new Proxy(client, {
    get(target, key) {
      const t = target as unknown as Record<string | symbol, unknown> & Client;
      if (key === "unsafe") return (q: string, p: unknown[] = [], o: object = {}) => t.unsafe(q, p as never, { ...o, prepare: true });
      if (key === "begin" || key === "savepoint") {
        return (...args: unknown[]) => {
          const fn = args.pop() as (c: Client) => unknown;
          return (t[key] as (...a: unknown[]) => unknown)(...args, (c: Client) => fn(preparing(c)));
        };
      }
      const v = t[key];
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

export function createPreparedPostgresJsDatabase(url: string, max: number): Database {
  const stats: QueryStats = { statements: 0 };
  const client = postgres(url, { max, onnotice: () => {} });
  const db = drizzle(preparing(client), { logger: countingLogger(stats) }) as unknown as Db;
  return { driver: "postgres-js", db, stats, concurrent: true, close: () => client.end({ timeout: 5 }) };
}
