// GET /instances, the paging and filter parameters refused before any query:
// a page size outside 1–100, an unknown status or include, a start bound that
// is not an RFC 3339 date-time, a workflow name the column cannot hold, and a
// cursor that is not exactly what the previous page handed out (storage's
// keyset cursor, storage/cursor.ts) — each a 400 problem naming the
// parameter, answered without the database. The pages themselves are walked
// on PGlite (api.test.ts, bounded-lists.test.ts).
import fc from "fast-check";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../../src/core/errors.ts";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { decodeCursor, encodeCursor } from "../../src/storage/cursor.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const TOKEN = "list-token";
const t = appWithoutDatabase({ workflows: [pipeline], apiToken: TOKEN });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

async function refused(query: string) {
  const r = await t.request(`/instances?${query}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const body = (await r.json()) as { error_type: string; issues?: { path: (string | number)[] }[]; instance: string };
  expect(r.status, query).toBe(400);
  expect(r.headers.get("content-type")).toBe("application/problem+json");
  expect(body).toMatchObject({ error_type: "BadRequest", instance: "/instances" });
  return body;
}

describe("GET /instances: parameters", () => {
  it("a page holds 1 to 100 instances: 0, 101, a fraction or a word is a 400 naming limit", async () => {
    for (const limit of ["0", "101", "1.5", "ten", "-1", ""]) {
      const body = await refused(`limit=${limit}`);
      expect(body.issues?.[0]?.path, limit).toEqual(["limit"]);
    }
  });

  it("status takes known statuses only (a comma list), include only payloads", async () => {
    for (const q of ["status=bogus", "status=running,bogus", "status=RUNNING", "include=everything", "include="]) {
      const body = await refused(q);
      expect(body.issues?.[0]?.path[0], q).toBe(q.split("=")[0]);
    }
  });

  it("started_after and started_before are RFC 3339 date-times; workflow is 1–255 characters", async () => {
    for (const q of ["started_after=yesterday", "started_before=2026-12-01", "started_after=2026-12-01T10:00:00", `workflow=${"w".repeat(256)}`, "workflow="]) await refused(q);
  });

  it("a cursor that is not one a page handed out is a 400, never a query", async () => {
    const stale = [
      "garbage",
      btoa('["x","y"]'),
      encodeCursor("2026-12-01T10:00:00.000Z", "a"), // milliseconds: the cursor keeps the row's microseconds
      encodeCursor("2026-13-01T10:00:00.000000Z", "a"),
      encodeCursor("2026-12-01T10:00:00.000000Z", "x".repeat(256)),
      btoa(JSON.stringify(["2026-12-01T10:00:00.000000Z", "a", "extra"])),
      "x".repeat(1001),
    ];
    for (const cursor of stale) await refused(`cursor=${encodeURIComponent(cursor)}`);
  });
});

describe("keyset cursors (storage/cursor.ts)", () => {
  it("decode(encode(timestamp, id)) is the pair, for any id the column holds; the text is URL-safe", () => {
    const micros = fc.date({ min: new Date("1970-01-01T00:00:00Z"), max: new Date("9999-12-31T23:59:59Z"), noInvalidDate: true }).chain((d) => fc.integer({ min: 0, max: 999 }).map((us) => `${d.toISOString().slice(0, -1)}${String(us).padStart(3, "0")}Z`));
    fc.assert(
      fc.property(micros, fc.string({ unit: "grapheme", maxLength: 255 }).filter((s) => s.length <= 255), (at, id) => {
        const cursor = encodeCursor(at, id);
        expect(cursor).toMatch(/^[A-Za-z0-9_-]*$/);
        expect(decodeCursor(cursor, "instance list")).toEqual([at, id]);
      }),
    );
  });

  it("a refusal is an InvalidArgumentError naming the list and the cursor parameter", () => {
    const refusal = (() => {
      try {
        decodeCursor("%%%", "dead letter list");
      } catch (e) {
        return e;
      }
    })();
    expect(refusal).toBeInstanceOf(InvalidArgumentError);
    expect(refusal).toMatchObject({ message: "invalid dead letter list cursor", issues: [{ path: ["cursor"], message: "invalid cursor" }] });
  });
});
