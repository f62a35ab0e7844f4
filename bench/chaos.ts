/**
 * `npm run chaos`: the full chaos run (500 workflows, 3 workers, kills every
 * 200–600 ms) on a throwaway Postgres cluster, or on DATABASE_URL. Exits
 * non-zero on any violation; the last line is the summary.
 */
import { createDatabase, startPostgresCluster } from "../test/support/postgres-cluster.ts";
import { runChaos } from "./chaos/driver.ts";

const quick = process.argv.includes("--quick");
const cluster = process.env.DATABASE_URL ? null : await startPostgresCluster();
let code: number;
try {
  const url = process.env.DATABASE_URL ?? (await createDatabase(cluster!.url, `chaos_${Date.now()}`));
  const r = await runChaos({
    databaseUrl: url,
    log: (l) => console.log(l),
    ...(quick ? { steps: 30, sagas: 8, consumers: 4, jobsPerConsumer: 3, listeners: 4, news: 5, cancels: 6 } : {}),
  });
  for (const v of r.violations) console.log(`violation: ${v}`);
  console.log(`chaos: ${r.workflows} workflows, ${r.kills} kills, lost ${r.lost}, duplicated ${r.duplicated}`);
  code = r.violations.length === 0 && r.lost === 0 && r.duplicated === 0 ? 0 : 1;
} finally {
  await cluster?.stop();
}
process.exit(code);
