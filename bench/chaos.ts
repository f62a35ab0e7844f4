/**
 * `npm run chaos`: the full chaos run (790 instances — children, matched
 * event waits and keyed concurrency among them — 3 workers, kills every
 * 200–600 ms, a worker connection terminated every 200–500 ms, Postgres
 * restarted 3 times, statement timeouts inside transactional activities) on a
 * throwaway Postgres cluster, or on DATABASE_URL (then without restarts).
 *
 * `--default-leases`: the workers keep the default lease (300 s), hand-off
 * lease and sweep interval, and no worker is killed (a killed worker's lease
 * rightly holds for 300 s); connections are terminated and Postgres restarted
 * as usual. Every instance must then be terminal within 60 s of the last
 * restart answering: a step the outage interrupted must not wait out its lease.
 *
 * `--under-load`: the same run while the machine is at load 10 or more. Before
 * it starts, CPU_BURNERS (default 10) `node -e` busy loops at nice 19 (so
 * Postgres and the workers still get time) are started and the run waits up
 * to 90 s for the 1-minute load average to reach 10; they are killed when the
 * run ends (finally, and on exit). Every time bound the driver asserts is
 * widened by UNDER_LOAD_FACTOR (3): the stall limit (60 s -> 180 s without
 * progress), a request's timeout before it is retried (5 s -> 15 s) and, with
 * `--default-leases`, the limit after the last restart (60 s -> 180 s). The
 * summary ends with the load averages (1, 5, 15 min) at the start and the end.
 * Combines with `--quick` and the other flags.
 * Exits non-zero on any violation; the last line is the summary.
 */
import { createDatabase, startPostgresCluster } from "../test/support/postgres-cluster.ts";
import { runChaos } from "./chaos/driver.ts";
import { startLoad, type Load } from "./chaos/load.ts";

/** `--under-load`: how much wider every time bound the driver asserts is. */
const UNDER_LOAD_FACTOR = 3;

const quick = process.argv.includes("--quick");
// Faults can be left out one by one, to tell which one a violation comes from.
const noRestarts = process.argv.includes("--no-pg-restarts");
const noBackendKills = process.argv.includes("--no-backend-kills");
const defaultLeases = process.argv.includes("--default-leases");
const underLoad = process.argv.includes("--under-load");
const factor = underLoad ? UNDER_LOAD_FACTOR : 1;
let load: Load | null = null;
process.on("exit", () => load?.stop());
if (underLoad) load = await startLoad(Number(process.env.CPU_BURNERS ?? 10), 10, 90_000, (l) => console.log(l));
const loadAtStart = load?.now();
let cluster: Awaited<ReturnType<typeof startPostgresCluster>> | null = null;
let code: number;
try {
  cluster = process.env.DATABASE_URL ? null : await startPostgresCluster();
  const url = process.env.DATABASE_URL ?? (await createDatabase(cluster!.url, `chaos_${Date.now()}`));
  const r = await runChaos({
    databaseUrl: url,
    log: (l) => console.log(l),
    timeFactor: factor,
    ...(noBackendKills ? { backendKillEveryMs: null } : {}),
    ...(defaultLeases ? { defaultLeases: true, killEveryMs: null, completeWithinSecondsOfRestart: 60 * factor } : {}),
    ...(cluster && !noRestarts ? { restartPostgres: () => cluster!.restart(), pgRestarts: quick ? 1 : 3, pgRestartEveryMs: quick ? 4000 : 8000 } : {}),
    ...(quick ? { steps: 30, sagas: 8, consumers: 4, jobsPerConsumer: 3, listeners: 4, news: 5, cancels: 6, slow: 6, parents: 4, childrenPerParent: 2, orders: 6, keyed: 8, keys: 2 } : {}),
  });
  const loadAtEnd = load?.now();
  if (defaultLeases && cluster && !noRestarts && r.pgRestarts === 0) r.violations.push("no Postgres restart happened while instances ran");
  for (const v of r.violations) console.log(`violation: ${v}`);
  console.log(
    `chaos: ${r.workflows} workflows, ${r.kills} kills, ${r.pgRestarts} pg restarts, ${r.backendKills} backend kills, ` +
      `${r.statementTimeouts} statement timeouts, lost ${r.lost}, duplicated ${r.duplicated} ` +
      `(${r.wallSeconds} s; max ${r.maxKeyOverlap} runs of one concurrency key at once` +
      `${r.secondsAfterLastRestart === null ? "" : `; all terminal ${r.secondsAfterLastRestart} s after the last pg restart answered`}${defaultLeases ? "; default leases" : ""}` +
      `${underLoad ? `; under load, bounds x${factor}, load average ${loadAtStart} at the start, ${loadAtEnd} at the end` : ""})`,
  );
  code = r.violations.length === 0 && r.lost === 0 && r.duplicated === 0 ? 0 : 1;
} finally {
  load?.stop();
  await cluster?.stop();
}
process.exit(code);
