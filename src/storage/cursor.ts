/**
 * Keyset cursors for newest-first pages: base64url(JSON [timestamp, id]).
 * The timestamp is the row's own at full microsecond precision, rendered by
 * Postgres (`keyTimestamp`): a JS Date would truncate it to milliseconds and
 * skip or repeat rows that share a millisecond. A cursor that is not exactly
 * what `encodeCursor` writes is an InvalidArgumentError (a 400), never a query.
 */
import { sql, type SQL } from "drizzle-orm";
import { InvalidArgumentError } from "../core/errors.ts";

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
