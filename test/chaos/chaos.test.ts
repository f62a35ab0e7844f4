// A short chaos run inside `npm test`: real worker processes SIGKILLed and
// restarted, their Postgres connections terminated every few hundred ms, the
// Postgres server itself restarted once, and statement timeouts hit inside a
// transactional activity, while workflows run — children invoked by parents
// (half of them cancelled mid-run), matched event waits with lookback among
// stray events, keyed concurrency among them; nothing lost, nothing
// duplicated, no key over its limit. It gets a Postgres server of its own:
// restarting the shared test server would break every other test file
// running at the same time. A second run keeps the default leases (300 s)
// and kills no worker, so only a working recovery path — not a lease running
// out — can resume the steps a Postgres restart interrupted.
import { afterAll, beforeAll, expect, it } from "vitest";
import { runChaos } from "../../bench/chaos/driver.ts";
import { createDatabase, startPostgresCluster, type PostgresCluster } from "../support/postgres-cluster.ts";

let cluster: PostgresCluster;
beforeAll(async () => {
  cluster = await startPostgresCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

it("survives worker kills, backend kills, a Postgres restart and statement timeouts: nothing lost, nothing duplicated, no lease left held", { timeout: 180_000 }, async () => {
  const r = await runChaos({
    databaseUrl: await createDatabase(cluster.url, "chaos"),
    workers: 3,
    steps: 30,
    sagas: 8,
    consumers: 4,
    jobsPerConsumer: 3,
    listeners: 4,
    news: 5,
    cancels: 6,
    slow: 6,
    killEveryMs: [300, 700],
    backendKillEveryMs: [200, 500],
    pgRestarts: 1,
    pgRestartEveryMs: 3000,
    restartPostgres: () => cluster.restart(),
    parents: 4,
    childrenPerParent: 2,
    orders: 6,
    keyed: 8,
    keys: 2,
  });
  expect(r.violations).toEqual([]);
  expect(r.lost).toBe(0);
  expect(r.duplicated).toBe(0);
  expect(r.kills).toBeGreaterThan(0);
  expect(r.backendKills).toBeGreaterThan(0);
  expect(r.pgRestarts).toBe(1);
  // instances slow-i plan i % 3 statement timeouts each: 0+1+2+0+1+2
  expect(r.statementTimeouts).toBeGreaterThanOrEqual(6);
});

it("with the default leases, a Postgres restart and killed connections: every instance terminal within 60 s of the server answering, nothing lost or duplicated", { timeout: 240_000 }, async () => {
  const r = await runChaos({
    databaseUrl: await createDatabase(cluster.url, "chaos_default_leases"),
    defaultLeases: true,
    killEveryMs: null,
    completeWithinSecondsOfRestart: 60,
    workers: 3,
    steps: 30,
    sagas: 8,
    consumers: 4,
    jobsPerConsumer: 3,
    listeners: 4,
    news: 5,
    cancels: 6,
    slow: 6,
    backendKillEveryMs: [200, 500],
    pgRestarts: 1,
    pgRestartEveryMs: 3000,
    restartPostgres: () => cluster.restart(),
    parents: 4,
    childrenPerParent: 2,
    orders: 6,
    keyed: 8,
    keys: 2,
  });
  expect(r.violations).toEqual([]);
  expect(r.lost).toBe(0);
  expect(r.duplicated).toBe(0);
  expect(r.kills).toBe(0);
  expect(r.pgRestarts).toBe(1);
  expect(r.secondsAfterLastRestart).not.toBeNull();
  expect(r.secondsAfterLastRestart!).toBeLessThanOrEqual(60);
});
