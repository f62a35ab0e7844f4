// postgres.js as the drivers configure it must mean what postgres.js itself means: the same rows whether a
// statement's values travel as parameters (named prepared statements) or are written into its text as
// literals (`prepare: false`), and the same arrays whether the array types are declared (always, now) or
// fetched from pg_type (postgres.js's default).
import { sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import fc from "fast-check";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { findPlaceholders, inlineParameters } from "../../src/storage/drivers/postgres-js-inline.ts";
import { BUILTIN_ARRAY_TYPES } from "../../src/storage/drivers/postgres-js-types.ts";
import { freshDatabase } from "../support/db.ts";

const dialect = new PgDialect();
let url: string;
let prepared: Database;
let inline: Database;
beforeAll(async () => {
  url = await freshDatabase("pgjs_statements");
  prepared = createPostgresJsDatabase({ url, max: 2 });
  inline = createPostgresJsDatabase({ url, max: 2, prepare: false });
  await prepared.db.execute(sql`CREATE TABLE kv (k text PRIMARY KEY, t text, n bigint, f double precision, b boolean, j jsonb, bytes bytea)`);
});
afterAll(async () => {
  await prepared?.close();
  await inline?.close();
});

describe("placeholders", () => {
  it("are found outside quotes, quoted identifiers, dollar quotes and comments only", () => {
    const text = `SELECT $1, '$2', E'\\'$3', "a$4", $$ $5 $$, $tag$ $6 $tag$, a$7, -- $8\n /* $9 /* $10 */ */ $11::int`;
    const found = findPlaceholders(text)!;
    expect(found.indexes).toEqual([0, 10]);
    expect(found.parts.join("")).toBe(text.replace("$1", "").replace("$11", ""));
  });

  it("an unterminated quote or an unused parameter leaves the statement as it was", () => {
    expect(findPlaceholders("SELECT 'abc")).toBeNull();
    expect(inlineParameters("SELECT $1", [1, 2])).toBeNull();
    expect(inlineParameters("SELECT $2", [1])).toBeNull();
    expect(inlineParameters("SELECT $1", [new Date()])).toBeNull();
    expect(inlineParameters("SELECT $1", ["a\0b"])).toBeNull();
    expect(inlineParameters("SELECT $1, $1", ["it's"])).toBe("SELECT E'it''s', E'it''s'");
  });
});

/** The rows, or the error's SQLSTATE: a statement must fail the same way on both paths too. */
async function outcome(db: Database, s: SQL): Promise<unknown> {
  try {
    return { rows: await queryRows(db.db, s) };
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    return { error: cause?.code ?? String(err) };
  }
}

const text = fc.string({ unit: fc.constantFrom("a", "'", "\\", '"', "$", "1", "é", "😀", "\n", " ", "E", "{", "}", ",") });

describe("inlined values mean what parameters mean", () => {
  it("selected back, compared and written, for strings, numbers, booleans, bigints, bytes and null", { timeout: 60_000 }, async () => {
    const value = fc.oneof(
      text,
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.boolean(),
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      fc.uint8Array({ maxLength: 8 }),
      fc.constant(null),
    );
    let i = 0;
    await fc.assert(
      fc.asyncProperty(text, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.uint8Array({ maxLength: 16 }), value, async (t, n, f, b, bytes, v) => {
        const k = `k${i++}`;
        const statements: SQL[] = [
          sql`SELECT ${t}::text AS t, ${n}::int AS n, ${f}::float8 AS f, ${b} AS b, ${bytes}::bytea AS bytes, ${t} AS untyped, ${t} = ${t} AS same`,
          sql`SELECT (${v})::text AS shown, (${v})::text IS NULL AS isnull`,
          sql`SELECT length(${t}) AS len, ${n} + 1 AS next, ${f} * 2 AS twice, coalesce(${t}, 'x') AS c, ${t} || ${t} AS doubled`,
        ];
        for (const s of statements) {
          // Written in, not sent as it was (which would agree trivially).
          const q = dialect.sqlToQuery(s);
          expect(inlineParameters(q.sql, q.params)).not.toBeNull();
          expect(await outcome(inline, s)).toEqual(await outcome(prepared, s));
        }
        await inline.db.execute(sql`INSERT INTO kv (k, t, n, f, b, j, bytes) VALUES (${k}, ${t}, ${n}, ${f}, ${b}, ${JSON.stringify({ t })}, ${bytes})`);
        const [row] = await queryRows<Record<string, unknown>>(prepared.db, sql`SELECT t, n::text AS n, f, b, j, bytes FROM kv WHERE k = ${k} AND t = ${t}`);
        expect(row).toEqual({ t, n: String(n), f: f === 0 ? 0 : f, b, j: { t }, bytes: Buffer.from(bytes) });
      }),
      { numRuns: 150 },
    );
  });

  it("a value that would end the literal cannot add a statement: it is stored as written", async () => {
    const evil = "x'); DROP TABLE kv; --\\'";
    await inline.db.execute(sql`INSERT INTO kv (k, t) VALUES (${"evil"}, ${evil})`);
    expect(await queryRows(prepared.db, sql`SELECT t FROM kv WHERE k = 'evil'`)).toEqual([{ t: evil }]);
  });
});

describe("declared array types", () => {
  it("are every built-in array type of the server (catalog row types aside)", async () => {
    const rows = await queryRows<{ elem: number; arr: number }>(
      prepared.db,
      sql`SELECT b.oid::int AS elem, b.typarray::int AS arr FROM pg_type a JOIN pg_type b ON b.oid = a.typelem
          WHERE a.typcategory = 'A' AND b.oid < 10000 AND b.typtype <> 'c' GROUP BY b.oid, b.typarray ORDER BY b.oid`,
    );
    expect(rows.map((r) => [r.elem, r.arr])).toEqual(BUILTIN_ARRAY_TYPES.map(([e, a]) => [e, a]));
  });

  it("parse and serialize as the fetched ones do", { timeout: 60_000 }, async () => {
    // postgres.js straight, as drizzle's users would have it: the types fetched from pg_type.
    const fetched = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(fc.option(text, { nil: null }), { maxLength: 5 }), fc.array(fc.option(fc.integer(), { nil: null }), { maxLength: 5 }), fc.array(fc.double({ noNaN: true }), { maxLength: 4 }), async (ts, ns, fs) => {
          const q = "SELECT $1::text[] AS ts, $2::int4[] AS ns, $3::float8[] AS fs, ARRAY[ARRAY[1,2],ARRAY[3,4]] AS nested, ARRAY[true, false, null] AS bs, '{}'::text[] AS empty";
          const expected = await fetched.unsafe(q, [ts, ns, fs] as never[], { prepare: false });
          const client = (prepared.db as unknown as { $client: postgres.Sql }).$client;
          expect(await client.unsafe(q, [ts, ns, fs] as never[])).toEqual(expected);
        }),
        { numRuns: 60 },
      );
    } finally {
      await fetched.end({ timeout: 5 });
    }
  });
});
