// Lazy transactions on Neon's driver (neon-lazy-tx.ts), through the local WebSocket proxy: BEGIN in the
// first statement's flight, COMMIT in the conclusion's, a lone conclusion alone. Against drizzle's
// BEGIN … COMMIT (lazyTransactions: false): the same stored state for generated conclusions; the flights
// counted by a proxy; then 160 transactions while every backend is terminated 40 times.
import WebSocket from "ws";
import { sql } from "drizzle-orm";
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LAST_STATEMENT, queryRows, type Database } from "../../src/storage/database.ts";
import { createNeonDatabase } from "../../src/storage/drivers/neon-serverless.ts";
import { startLatencyProxy } from "../../bench/lib/latency-proxy.ts";
import { freshDatabase, useLocalNeonProxy } from "../support/db.ts";
import { sleep, uid } from "./cases/helpers.ts";
import { caseArb, createKillTables, expectKillRoundsSettle, expectSameAsEnvelope, prepareSide, type Side } from "./lazy-tx-cases.ts";

async function open(prefix: string, lazy: boolean): Promise<Side> {
  useLocalNeonProxy();
  const url = await freshDatabase(prefix);
  return prepareSide(url, createNeonDatabase({ url, max: 10, lazyTransactions: lazy }));
}

/** The messages of an error and its causes (drizzle wraps a statement's error in "Failed query: …"). */
async function failure(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  const out: string[] = [];
  for (let e = err, i = 0; e instanceof Error && i < 6; e = e.cause, i++) out.push(e.message);
  return out.join(" / ");
}

/** Sessions left inside a transaction: a connection handed back mid-transaction would show here. */
async function openTransactions(side: Side): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    side.database.db,
    sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
  );
  return row!.n;
}

describe("lazy transactions on Neon's driver ≡ drizzle's BEGIN … COMMIT", () => {
  let lazy: Side;
  let envelope: Side;
  beforeAll(async () => {
    [lazy, envelope] = await Promise.all([open("neon_lazy_lazy", true), open("neon_lazy_envelope", false)]);
  });
  afterAll(async () => {
    await Promise.all([lazy.database.close(), envelope.database.close()]);
  });

  it("generated step conclusions leave the same stored state, fenced or not, with or without the activity's writes", { timeout: 180_000 }, async () => {
    // A write without parameters goes by the simple protocol: BEGIN then rides in its text.
    await expectSameAsEnvelope(lazy, envelope, caseArb({ simpleWrites: true }));
    // No connection went back to the pool inside a transaction (a failed fence leaves one aborted until ROLLBACK).
    expect(await openTransactions(lazy)).toBe(0);
  });

  it("a lone last statement runs without BEGIN; with a statement before it, inside one transaction", async () => {
    const probe = sql`${sql.raw(LAST_STATEMENT)}SELECT now() = statement_timestamp() AS alone`;
    const [lone] = await lazy.database.db.transaction((tx) => queryRows<{ alone: boolean }>(tx, probe));
    const [enveloped] = await envelope.database.db.transaction((tx) => queryRows<{ alone: boolean }>(tx, probe));
    const [behind] = await lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT ${1}::int`);
      return queryRows<{ alone: boolean }>(tx, probe);
    });
    const [behindSimple] = await lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT 1`);
      return queryRows<{ alone: boolean }>(tx, probe);
    });
    expect([lone!.alone, enveloped!.alone, behind!.alone, behindSimple!.alone]).toEqual([true, false, false, false]);
  });

  it("a BEGIN with settings keeps its transaction around a lone last statement; named statements begin it on their own", async () => {
    const iso = sql`${sql.raw(LAST_STATEMENT)}SELECT current_setting(${"transaction_isolation"}) AS iso, now() = statement_timestamp() AS alone`;
    const [serializable] = await lazy.database.db.transaction((tx) => queryRows<{ iso: string; alone: boolean }>(tx, iso), { isolationLevel: "serializable" });
    expect(serializable).toEqual({ iso: "serializable", alone: false });
    const id = uid("named");
    const table = pgTable("lazy_user", { instanceId: text("instance_id").notNull(), n: integer("n").notNull() });
    await lazy.database.db.transaction(async (tx) => {
      await tx.insert(table).values({ instanceId: id, n: 1 }).prepare("lazy_user_named").execute();
      await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO lazy_user VALUES (${id}, ${2})`);
    });
    const rows = await queryRows<{ n: number }>(lazy.database.db, sql`SELECT n FROM lazy_user WHERE instance_id = ${id} ORDER BY n`);
    expect(rows.map((r) => r.n)).toEqual([1, 2]);
    expect(await openTransactions(lazy)).toBe(0);
  });

  it("a failed first statement rolls back; nothing runs after the last statement or the transaction's end; the pool still serves", async () => {
    const id = uid("after");
    const bad = lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, ${"not a number"})`);
    });
    expect(await failure(bad)).toMatch(/invalid input syntax/);
    const after = lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO lazy_user VALUES (${id}, 1)`);
      await tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, 2)`);
    });
    expect(await failure(after)).toMatch(/after the transaction's last statement/);
    // A failed lone statement fails its transaction, even when the callback swallowed the error.
    const swallowed = lazy.database.db.transaction(async (tx) => {
      await tx.execute(sql`${sql.raw(LAST_STATEMENT)}INSERT INTO lazy_user VALUES (${id}, 1)`).catch(() => undefined);
    });
    expect(await failure(swallowed)).toMatch(/duplicate key/);
    let leaked: Promise<unknown> = Promise.resolve();
    await lazy.database.db.transaction(async (tx) => {
      leaked = sleep(20).then(() => tx.execute(sql`INSERT INTO lazy_user VALUES (${id}, 3)`));
    });
    expect(await failure(leaked)).toMatch(/has ended/);
    const left = await queryRows<{ n: number }>(lazy.database.db, sql`SELECT n FROM lazy_user WHERE instance_id = ${id} ORDER BY n`);
    expect(left.map((r) => r.n)).toEqual([1]);
    expect(await openTransactions(lazy)).toBe(0);
  });
});

describe("round trips of a Neon transaction (counted by a proxy in front of the WebSocket proxy)", () => {
  afterAll(() => useLocalNeonProxy());

  it("open connection: lone conclusion 1, write + conclusion 2; fresh client: 3 and 4; the envelope 3, 4, 5 and 6", async () => {
    useLocalNeonProxy();
    const url = await freshDatabase("neon_lazy_flights");
    const setup = createNeonDatabase({ url, max: 1 });
    await setup.db.execute(sql`CREATE TABLE flights (n int)`);
    await setup.close();
    const proxy = await startLatencyProxy(`postgres://ws@127.0.0.1:${inject("TEST_NEON_PROXY_PORT")}/`, 2, { trace: "websocket" });
    const last = sql`${sql.raw(LAST_STATEMENT)}INSERT INTO flights VALUES (${2})`;
    const write = async (tx: Database["db"], simple: boolean) => {
      await tx.execute(simple ? sql`INSERT INTO flights VALUES (1)` : sql`INSERT INTO flights VALUES (${1})`);
      await tx.execute(last);
    };
    const count = async (lazyTransactions: boolean) => {
      const open = () => createNeonDatabase({ url, max: 1, wsProxy: `127.0.0.1:${new URL(proxy.url).port}`, webSocketConstructor: WebSocket, lazyTransactions });
      const flights: number[] = [];
      const measure = async (db: Database, fn: (tx: Database["db"]) => Promise<unknown>, fresh = false) => {
        const before = proxy.connections();
        proxy.reset();
        await db.db.transaction((tx) => fn(tx as unknown as Database["db"]));
        // On a fresh client only its own connection's: the previous client's goodbye may still be crossing.
        flights.push(fresh ? proxy.flights().filter((f) => f.connection > before).length : proxy.roundTrips());
      };
      const warm = open();
      await warm.db.execute(sql`SELECT 1`);
      await measure(warm, (tx) => tx.execute(last));
      await measure(warm, (tx) => write(tx, false));
      await measure(warm, (tx) => write(tx, true));
      await warm.close();
      for (const fn of [(tx: Database["db"]) => tx.execute(last), (tx: Database["db"]) => write(tx, false)]) {
        const fresh = open();
        await measure(fresh, fn, true);
        await fresh.close();
      }
      return flights;
    };
    try {
      // Fresh: the WebSocket upgrade and the start-up come first (trust: no password to pipeline).
      expect(await count(true)).toEqual([1, 2, 2, 3, 4]);
      expect(await count(false)).toEqual([3, 4, 4, 5, 6]);
    } finally {
      await proxy.stop();
    }
    // createNeonDatabase({ wsProxy }) pointed the process's neonConfig at the stopped proxy.
    useLocalNeonProxy();
    const check = createNeonDatabase({ url, max: 1 });
    const [n] = await queryRows<{ n: number }>(check.db, sql`SELECT count(*)::int AS n FROM flights`);
    await check.close();
    // Each measured transaction committed: 1 + 2 + 2 + 1 + 2 rows per variant.
    expect(n!.n).toBe(16);
  });
});

describe("lazy Neon transactions under backend kills", () => {
  let side: Side;
  beforeAll(async () => {
    side = await open("neon_lazy_kills", true);
    await createKillTables(side);
  });
  afterAll(async () => {
    await side.database.close();
  });

  it("160 transactions while every backend is terminated 40 times: all settle, each effect once", { timeout: 240_000 }, async () => {
    // k % 3 = 0: a body statement, then the last one; 1: the same, the body by the simple protocol; 2: the last alone.
    const bodyOf = (k: number) => (k % 3 === 2 ? null : k % 3 === 0 ? sql`INSERT INTO kill_body (k) VALUES (${k})` : sql.raw(`INSERT INTO kill_body (k) VALUES (${k})`));
    const failures = await expectKillRoundsSettle(side, bodyOf);
    expect(await openTransactions(side)).toBe(0);
    console.log(`lazy Neon transactions: 160 settled through 40 kill rounds, ${failures} attempts failed and were retried`);
  });
});
