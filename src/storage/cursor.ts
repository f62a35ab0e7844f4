/**
 * Keyset cursors for newest-first pages: base64url(JSON [timestamp, id]).
 * The timestamp is the row's own at full microsecond precision, rendered by
 * Postgres (`keyTimestamp`): a JS Date would truncate it to milliseconds and
 * skip or repeat rows that share a millisecond. A cursor that is not exactly
 * what `encodeCursor` writes is an InvalidArgumentError (a 400), never a query.
 */
import { sql, type SQL } from "drizzle-orm";
import { InvalidArgumentError } from "../core/errors.ts";
import { queryRows, type Executor } from "./database.ts";
import type { Row } from "./rows.ts";

/** `column` as the cursor's timestamp text (select it beside the row, `AS ..._key`). */
export function keyTimestamp(column: SQL): SQL {
  return sql`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

export function encodeCursor(timestamp: string, id: string): string {
  const bytes = new TextEncoder().encode(JSON.stringify([timestamp, id]));
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** `what` names the list in the error ("instance list"). */
export function decodeCursor(cursor: string, what: string): [string, string] {
  try {
    const bin = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
    const value: unknown = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === "string" && typeof value[1] === "string") {
      if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(value[0]) && !Number.isNaN(Date.parse(value[0])) && value[1].length <= 255) {
        return [value[0], value[1]];
      }
    }
  } catch {
    // fall through
  }
  throw new InvalidArgumentError(`invalid ${what} cursor`, [{ path: ["cursor"], message: "invalid cursor" }]);
}

export interface NewestFirstQuery {
  /** What to select and from where: `sql\`${COLUMNS} FROM table\``. */
  select: SQL;
  where: SQL[];
  /** The timestamp and id columns the page is ordered and keyed by (constants, not input). */
  time: string;
  id: string;
  cursor?: string | null | undefined;
  limit: number;
  /** Names the list in a bad-cursor error. */
  what: string;
}

/** One page, newest first, keyed by (time, id): stable under concurrent inserts, no OFFSET scan. */
export async function newestFirstPage(ex: Executor, q: NewestFirstQuery): Promise<{ rows: Row[]; nextCursor: string | null }> {
  const time = sql.raw(q.time);
  const id = sql.raw(q.id);
  const where = [...q.where];
  if (q.cursor) {
    const [at, key] = decodeCursor(q.cursor, q.what);
    where.push(sql`(${time}, ${id}) < (${at}::timestamptz, ${key}::text)`);
  }
  const whereSql = where.length ? sql`WHERE ${sql.join(where, sql` AND `)}` : sql``;
  // One extra row tells whether there is a next page.
  const rows = await queryRows<Row>(
    ex,
    sql`SELECT ${keyTimestamp(time)} AS page_key_time, ${q.select} ${whereSql}
        ORDER BY ${time} DESC, ${id} DESC
        LIMIT ${q.limit + 1}::int`,
  );
  const page = rows.slice(0, q.limit);
  const last = page.at(-1);
  return { rows: page, nextCursor: rows.length > q.limit && last ? encodeCursor(String(last.page_key_time), String(last[q.id])) : null };
}
