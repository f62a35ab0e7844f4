// Proves the test harness: a fresh database per file reachable by postgres.js,
// and the Neon serverless Pool reaching the same server through the local proxy.
import { Pool } from "@neondatabase/serverless";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import WebSocket from "ws";
import { freshDatabase, useLocalNeonProxy } from "./support/db.ts";

describe("test harness", () => {
  let url: string;
  let sql: postgres.Sql;

  beforeAll(async () => {
    url = await freshDatabase("harness");
    sql = postgres(url, { max: 2, onnotice: () => {} });
    useLocalNeonProxy();
  });
  afterAll(async () => {
    await sql?.end();
  });

  it("gives each file its own fresh database reachable by postgres.js", async () => {
    const [row] = await sql<{ db: string; one: number }[]>`SELECT current_database() AS db, 1 AS one`;
    expect(row?.one).toBe(1);
    expect(url.endsWith(`/${row?.db}`)).toBe(true);
    const tables = await sql`SELECT 1 FROM pg_tables WHERE schemaname = 'public'`;
    expect(tables).toHaveLength(0);
  });

  it("runs Neon Pool queries and a committed transaction through the WebSocket proxy", async () => {
    const pool = new Pool({ connectionString: url });
    try {
      const { rows } = await pool.query<{ n: number }>("SELECT $1::int + 1 AS n", [41]);
      expect(rows[0]?.n).toBe(42);

      await pool.query("CREATE TABLE harness_items (id int PRIMARY KEY, label text NOT NULL)");
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await client.query("INSERT INTO harness_items (id, label) VALUES ($1, $2)", [1, "via neon"]);
        await client.query("COMMIT");
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
    }
    const seen = await sql<{ label: string }[]>`SELECT label FROM harness_items WHERE id = 1`;
    expect(seen.map((r) => r.label)).toEqual(["via neon"]);
  });

  it("rolls back a Neon transaction so postgres.js sees nothing", async () => {
    const pool = new Pool({ connectionString: url });
    try {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await client.query("INSERT INTO harness_items (id, label) VALUES (2, 'rolled back')");
        await client.query("ROLLBACK");
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
    }
    expect(await sql`SELECT 1 FROM harness_items WHERE id = 2`).toHaveLength(0);
  });

  it("refuses to proxy to a non-local target", async () => {
    const port = inject("TEST_NEON_PROXY_PORT");
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1?address=example.com:5432`);
    const code = await new Promise<number>((resolve) => ws.on("close", (c) => resolve(c)));
    expect(code).toBe(1008);
  });
});
