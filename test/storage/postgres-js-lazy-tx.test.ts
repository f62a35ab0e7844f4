// Transactions that begin with their first statement (postgres-js-lazy-tx.ts): a step's lone fenced
// conclusion is sent alone, autocommitted. Against the envelope (postgres.js begin(), BEGIN … COMMIT):
// the same stored state for generated conclusions, fences that hold or not, bodies that write, fail or
// do nothing; then 160 transactions while every backend is terminated 40 times.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LAST_STATEMENT, queryRows } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { startLatencyProxy } from "../../bench/lib/latency-proxy.ts";
import { freshDatabase } from "../support/db.ts";
import { sleep, uid } from "./cases/helpers.ts";
import { caseArb, createKillTables, expectKillRoundsSettle, expectSameAsEnvelope, prepareSide, type Side } from "./lazy-tx-cases.ts";

async function open(prefix: string, lazy: boolean, mode: "prepared" | "inline" = "prepared"): Promise<Side> {
  const url = await freshDatabase(prefix);
  return prepareSide(url, createPostgresJsDatabase({ url, max: 10, lazyTransactions: lazy, pipeline: lazy, prepare: mode === "prepared" }));
}

describe("lazy transactions ≡ the BEGIN … COMMIT envelope", () => {
  let lazy: Side;
  let envelope: Side;
  beforeAll(async () => {
    [lazy, envelope] = await Promise.all([open("lazy_tx_lazy", true), open("lazy_tx_envelope", false)]);
  });
  afterAll(async () => {
    await Promise.all([lazy.database.close(), envelope.database.close()]);
  });

  it("generated step conclusions leave the same stored state, fenced or not, with or without the activity's writes", { timeout: 120_000 }, async () => {
    await expectSameAsEnvelope(lazy, envelope, caseArb({ simpleWrites: false }));
  });

  it("a lone last statement runs without BEGIN; with a statement before it, inside one transaction", async () => {
    const probe = sql`${sql.raw(LAST_STATEMENT)}SELECT now() = statement_timestamp() AS alone`;
    const [lone] = await lazy.database.db.transaction((tx) => queryRows<{ alone: boolean }>(tx, probe));
    const [enveloped] = await envelope.database.db.transaction((tx) => queryRows<{ alone: boolean }>(tx, probe));
    const [behind] = await lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT 1`);
      return queryRows<{ alone: boolean }>(tx, probe);
    });
    expect([lone!.alone, enveloped!.alone, behind!.alone]).toEqual([true, false, false]);
  });

  it("nothing runs after the last statement, nor after the transaction ended; the pool still serves", async () => {
    const id = uid("after");
    await expect(
      lazy.database.db.transaction(async (tx) => {
        await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO lazy_user VALUES (${id}, 1)`);
        await tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, 2)`);
      }),
    ).rejects.toThrow();
    let leaked: Promise<unknown> = Promise.resolve();
    await lazy.database.db.transaction(async (tx) => {
      leaked = sleep(20).then(() => tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, 3)`));
    });
    await expect(leaked).rejects.toThrow();
    const left = await queryRows<{ n: number }>(lazy.database.db, sql`SELECT n FROM lazy_user WHERE instance_id = ${id} ORDER BY n`);
    expect(left.map((r) => r.n)).toEqual([1]);
  });
});

describe("round trips of a transaction (counted by a TCP proxy)", () => {
  it("lone conclusion 1, activity write + conclusion 2 (BEGIN and COMMIT in their flights); the envelope 3 and 4", async () => {
    const url = await freshDatabase("lazy_tx_flights");
    const setup = createPostgresJsDatabase({ url, max: 1 });
    await setup.db.execute(sql`CREATE TABLE flights (n int)`);
    await setup.close();
    const proxy = await startLatencyProxy(url, 2);
    const last = sql`${sql.raw(LAST_STATEMENT)}INSERT INTO flights VALUES (2)`;
    const count = async (opts: { lazyTransactions: boolean; pipeline: boolean }) => {
      const database = createPostgresJsDatabase({ url: proxy.url, max: 1, ...opts });
      // Both statements prepared on the one connection first: the count is the transaction's alone.
      await database.db.transaction(async (tx) => {
        await tx.execute(sql`INSERT INTO flights VALUES (1)`);
        await tx.execute(last);
      });
      const flights: number[] = [];
      proxy.reset();
      await database.db.transaction((tx) => tx.execute(last));
      flights.push(proxy.roundTrips());
      proxy.reset();
      await database.db.transaction(async (tx) => {
        await tx.execute(sql`INSERT INTO flights VALUES (1)`);
        await tx.execute(last);
      });
      flights.push(proxy.roundTrips());
      await database.close();
      return flights;
    };
    try {
      expect(await count({ lazyTransactions: true, pipeline: true })).toEqual([1, 2]);
      expect(await count({ lazyTransactions: true, pipeline: false })).toEqual([1, 4]);
      expect(await count({ lazyTransactions: false, pipeline: false })).toEqual([3, 4]);
    } finally {
      await proxy.stop();
    }
  });
});

describe.each(["prepared", "inline"] as const)("lazy transactions under backend kills (%s statements)", (mode) => {
  let side: Side;
  beforeAll(async () => {
    side = await open(`lazy_tx_kills_${mode}`, true, mode);
    await createKillTables(side);
  });
  afterAll(async () => {
    await side.database.close();
  });

  it("160 transactions while every backend is terminated 40 times: all settle, each effect once", { timeout: 180_000 }, async () => {
    // Even k: a body statement, then the last one (a real transaction); odd k: the last statement alone.
    const failures = await expectKillRoundsSettle(side, (k) => (k % 2 === 0 ? sql`INSERT INTO kill_body (k) VALUES (${k})` : null));
    console.log(`lazy transactions (${mode}): 160 settled through 40 kill rounds, ${failures} attempts failed and were retried`);
  });
});
