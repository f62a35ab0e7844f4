// A connection whose backend is terminated after it sent some of a statement's rows: postgres.js 3.4.9
// keeps the connection's row count, so its next result (after the reconnect) would start at that index,
// a sparse array with its first rows missing. The driver's results are dense again; real Postgres, a real
// pg_terminate_backend, both statement modes.
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { freshDatabase } from "../support/db.ts";

// Rows 1–3 reach the client, then the backend terminates itself before row 4.
const KILL_AFTER_THREE = "SELECT i, CASE WHEN i = 3 THEN pg_terminate_backend(pg_backend_pid()) END AS killed FROM generate_series(1, 5) i";

let url: string;
beforeAll(async () => {
  url = await freshDatabase("pgjs_rows");
});

/** The first statement on the reconnected connection may be refused with the old backend's error (never sent): try again. */
async function afterReconnect<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    expect(String((err as { code?: unknown }).code ?? (err as { cause?: { code?: unknown } }).cause?.code)).toMatch(/^(57P01|CONNECTION_CLOSED)$/);
    return run();
  }
}

describe("postgres.js itself", () => {
  it("resolves the next statement after such a drop with its first rows missing (why the driver repairs them)", async () => {
    const client = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await expect(client.unsafe(KILL_AFTER_THREE)).rejects.toThrow();
      const rows = await afterReconnect(() => client.unsafe("SELECT x FROM generate_series(1, 2) x"));
      expect(rows.count).toBe(2);
      expect(0 in rows).toBe(false);
      expect(rows.filter(Boolean)).toEqual([{ x: 1 }, { x: 2 }]);
    } finally {
      await client.end({ timeout: 5 });
    }
  });
});

describe.each(["prepared", "inline"] as const)("the driver, %s statements", (mode) => {
  let database: Database;
  beforeAll(() => {
    database = createPostgresJsDatabase({ url, max: 1, prepare: mode === "prepared" });
  });
  afterAll(async () => {
    await database?.close();
  });

  it("a statement after a connection killed mid-result gets all its rows from index 0", async () => {
    await expect(database.db.execute(sql.raw(KILL_AFTER_THREE))).rejects.toThrow();
    const rows = await afterReconnect(() => queryRows<{ x: number }>(database.db, sql`SELECT x FROM generate_series(1, ${2}::int) x`));
    expect(rows).toEqual([{ x: 1 }, { x: 2 }]);
    expect(Object.keys(rows)).toEqual(["0", "1"]);
  });

  it("an UPDATE … RETURNING after it returns the row it changed (a lease grab is not mistaken for a refusal)", async () => {
    await database.db.execute(sql`CREATE TABLE IF NOT EXISTS rows_${sql.raw(mode)} (id int PRIMARY KEY, owner text)`);
    await database.db.execute(sql`INSERT INTO rows_${sql.raw(mode)} VALUES (1, NULL) ON CONFLICT (id) DO UPDATE SET owner = NULL`);
    await expect(database.db.execute(sql.raw(KILL_AFTER_THREE))).rejects.toThrow();
    const [row] = await afterReconnect(() =>
      queryRows<{ id: number; owner: string }>(database.db, sql`UPDATE rows_${sql.raw(mode)} SET owner = ${"w1"} WHERE id = 1 AND owner IS NULL RETURNING id, owner`),
    );
    expect(row).toEqual({ id: 1, owner: "w1" });
    // The pool still serves, with dense results.
    expect(await queryRows(database.db, sql`SELECT 1 AS one`)).toEqual([{ one: 1 }]);
  });
});
