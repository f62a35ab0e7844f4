/**
 * The faults the chaos driver injects while workflows run, each on its own
 * loop: worker processes SIGKILLed and restarted, the workers' Postgres
 * connections terminated (`pg_terminate_backend`), and the whole Postgres
 * server restarted (`pg_ctl restart -m fast`). Each loop counts what it did;
 * none of them may stop the run by failing (a fault that could not be
 * injected, e.g. while the server is down, is simply not counted).
 */
import { sql } from "drizzle-orm";
import { queryRows, type Database } from "../../src/storage/database.ts";

/** `application_name` of the workers' connections (PGAPPNAME), so the backend killer spares the driver's own. */
export const WORKER_APP_NAME = "edda-chaos-worker";

export interface FaultPlan {
  /** SIGKILL a worker and restart it, every [min, max] ms. */
  killWorker?: { everyMs: [number, number]; kill: () => Promise<void> };
  /** Terminate one worker connection every [min, max] ms. */
  backendKills?: { everyMs: [number, number]; admin: Database };
  /** Restart Postgres `times` times, `everyMs` apart (the first after `everyMs`). */
  pgRestarts?: { times: number; everyMs: number; restart: () => Promise<void> };
}

export interface FaultCounts {
  kills: number;
  pgRestarts: number;
  backendKills: number;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const between = ([lo, hi]: [number, number]) => lo + Math.floor(Math.random() * (hi - lo + 1));

export function startFaults(plan: FaultPlan, log: (line: string) => void): { stop(): Promise<FaultCounts>; lastRestartAnsweredAt(): number | null } {
  const counts: FaultCounts = { kills: 0, pgRestarts: 0, backendKills: 0 };
  let answeredAt: number | null = null;
  let running = true;
  const loops: Promise<void>[] = [];

  if (plan.killWorker) {
    const { everyMs, kill } = plan.killWorker;
    loops.push(
      (async () => {
        while (running) {
          await pause(between(everyMs));
          if (!running) break;
          counts.kills++;
          await kill().catch((e: unknown) => log(`chaos: worker restart failed: ${String(e)}`));
        }
      })(),
    );
  }

  if (plan.backendKills) {
    const { everyMs, admin } = plan.backendKills;
    loops.push(
      (async () => {
        while (running) {
          await pause(between(everyMs));
          if (!running) break;
          const rows = await queryRows<{ killed: boolean }>(
            admin.db,
            sql`SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
                WHERE datname = current_database() AND application_name = ${WORKER_APP_NAME}
                ORDER BY random() LIMIT 1`,
          ).catch(() => []);
          if (rows[0]?.killed) counts.backendKills++;
        }
      })(),
    );
  }

  if (plan.pgRestarts) {
    const { times, everyMs, restart } = plan.pgRestarts;
    loops.push(
      (async () => {
        while (running && counts.pgRestarts < times) {
          for (let waited = 0; running && waited < everyMs; waited += 100) await pause(100);
          if (!running) break;
          const t = Date.now();
          await restart();
          // pg_ctl -w returns once the server accepts connections again.
          answeredAt = Date.now();
          counts.pgRestarts++;
          log(`chaos: postgres restarted (${Date.now() - t} ms)`);
        }
      })(),
    );
  }

  return {
    lastRestartAnsweredAt: () => answeredAt,
    async stop() {
      running = false;
      await Promise.all(loops);
      return counts;
    },
  };
}
