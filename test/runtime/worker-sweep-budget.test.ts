// The cron sweep under the Workers Free CPU budget in real workerd
// (`wrangler dev`, functions/worker.ts with its local queue): each cron
// invocation is held to 10 ms by the budget's estimate (statements issued ×
// the measured CPU per statement; an isolate cannot read its own CPU time,
// and wrangler dev enforces no CPU limit) and leaves the rest of its tasks
// deferred; a timer that is due fires in the very first invocation (due
// timers lead every sweep); over 14 cron ticks, one minute apart, the
// rotation runs every task. The woken instance then completes: valid work
// still flows under the budget. What the sweep really costs in CPU is
// measured by bench/sweep-cost.ts, not here.
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import type { SweepTask } from "../../src/engine/sweeper.ts";
import { WORKERS_FREE_SWEEP_CPU_MS, type InvocationCounts, type SweepRecord } from "../../src/platform/cloudflare.ts";
import { queryRows } from "../../src/storage/database.ts";
import { api, waitForStatus } from "./processes.ts";
import { startWorkerWith } from "./worker-setup.ts";

const ROTATING: SweepTask[] = ["webhook_expiry", "deadlines", "stale_leases", "channel_delivery", "resumable", "parked", "outbox", "channel_retention", "instance_retention", "dedupe_retention", "session_retention", "concurrency", "timed_starts", "bulk_operations"];
const PRIORITY: SweepTask[] = ["timers", "message_timeouts", "schedules"];

// The Free plan's budget, as a deployed Worker has it by default (the runtime tests turn it off unless told).
const w = startWorkerWith("workerd_sweep_budget", () => ({ EDDA_SECRET: "sweep-secret", EDDA_SWEEP_CPU_MS: String(WORKERS_FREE_SWEEP_CPU_MS) }), { stopSignal: "SIGKILL" });

/**
 * One cron invocation at `time`, and what it recorded. Miniflare's own
 * trigger (/cdn-cgi/handler/scheduled), not wrangler's /__scheduled: only it
 * passes the tick's time on as `controller.scheduledTime`.
 */
async function cronAt(time: number): Promise<SweepRecord> {
  const res = await fetch(`${w.worker.url}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("* * * * *")}&time=${time}`);
  expect(res.status).toBe(200);
  await res.text();
  const record = (await api<InvocationCounts>(w.worker.url, "GET", "/_edda/invocations")).body.lastSweep;
  expect(record?.scheduledTime).toBe(time);
  return record!;
}

it("each cron invocation stays within the 10 ms budget, a due timer fires in the first, and one tick per rotating task runs every one of them", { timeout: 90_000 }, async () => {
  // A reminder of an hour: its wake-up is a delayed queue message an hour away. Made due now, only the cron can fire it.
  const started = await api<{ instanceId: string }>(w.worker.url, "POST", "/workflows/reminder/instances", { input: { seconds: 3600 }, instanceId: "budget-reminder" });
  expect(started.status).toBe(201);
  await waitForStatus(w.worker.url, "budget-reminder", ["waiting_for_timer"]);
  await w.db.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = now() - interval '1 second' WHERE instance_id = 'budget-reminder'`);

  // Ticks one minute apart, starting at a turn whose rotation head is the first rotating task.
  const minute = 60_000;
  const base = (Math.floor(Date.now() / minute / ROTATING.length) + 1) * ROTATING.length * minute;
  const ran = new Set<SweepTask>();
  const records: SweepRecord[] = [];
  for (let tick = 0; tick < ROTATING.length; tick++) {
    const r = await cronAt(base + tick * minute);
    records.push(r);
    expect(r.cpuBudgetMs).toBe(WORKERS_FREE_SWEEP_CPU_MS);
    expect(r.rotationTurn % ROTATING.length).toBe(tick);
    expect(r.failures).toBe(0);
    expect(r.skipped).toEqual([]);
    // Held to the budget: the estimate stays within it, and the rest waits for a later tick.
    expect(r.cpuEstimateMs, JSON.stringify(r)).toBeLessThanOrEqual(WORKERS_FREE_SWEEP_CPU_MS);
    expect(r.deferred.length).toBeGreaterThan(0);
    for (const t of PRIORITY) expect(r.deferred).not.toContain(t);
    // The head of this turn's rotation always runs.
    expect(r.deferred).not.toContain(ROTATING[tick]);
    for (const t of ROTATING) if (!r.deferred.includes(t)) ran.add(t);
  }
  console.log("budgeted sweeps (statements, estimate ms, deferred):", records.map((r) => `${r.statements}/${r.cpuEstimateMs.toFixed(1)}/${r.deferred.length}`).join(" "));
  expect(records[0]!.timersFired).toBe(1);
  expect(records.slice(1).every((r) => r.timersFired === 0)).toBe(true);
  expect([...ran].sort()).toEqual([...ROTATING].sort());

  // The instance the first sweep woke completes through its follow-up (the queue).
  const done = await waitForStatus(w.worker.url, "budget-reminder", ["completed", "failed"], 30_000);
  expect(done.output).toEqual({ reminded: true });
  const [history] = await queryRows<{ n: number }>(w.db.db, sql`SELECT count(*)::int AS n FROM workflow_history WHERE instance_id = 'budget-reminder' AND event_type = 'TimerExpired'`);
  expect(history!.n).toBe(1);
});
