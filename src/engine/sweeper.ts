/**
 * The sweeper: what the cron trigger runs. Each task works in bounded batches
 * with SKIP LOCKED (inside storage), so concurrent sweeps split the work rather
 * than duplicate it, and it stops starting new batches after a time budget.
 * Everything it finds is dispatched; the dispatcher's steps do the rest.
 */
import type { DispatchScope } from "./dispatcher.ts";
import type { Engine } from "./engine.ts";

export interface SweepOptions {
  /** Rows per batch (default 200). */
  batchSize?: number;
  /** Stop starting new batches after this long (default 20 s). */
  budgetMs?: number;
}

export interface SweepReport {
  timersFired: number;
  staleLeasesReleased: number;
  resumed: number;
  durationMs: number;
}

export async function sweep(engine: Engine, opts: SweepOptions = {}, scope?: DispatchScope): Promise<SweepReport> {
  const started = Date.now();
  const batch = opts.batchSize ?? 200;
  const budget = opts.budgetMs ?? 20_000;
  const inBudget = () => Date.now() - started < budget;
  const report: SweepReport = { timersFired: 0, staleLeasesReleased: 0, resumed: 0, durationMs: 0 };
  const { storage, dispatcher } = engine;
  const dispatched = new Set<string>();
  const dispatch = (ids: string[]) => {
    for (const instanceId of ids) {
      if (dispatched.has(instanceId)) continue;
      dispatched.add(instanceId);
      dispatcher.dispatch({ instanceId }, scope);
    }
  };

  while (inBudget()) {
    const ids = await storage.fireExpiredTimers(batch);
    report.timersFired += ids.length;
    dispatch(ids);
    if (ids.length < batch) break;
  }
  while (inBudget()) {
    const ids = await storage.releaseStaleLeases(batch);
    report.staleLeasesReleased += ids.length;
    dispatch(ids);
    if (ids.length < batch) break;
  }
  if (inBudget()) {
    const ids = await storage.findResumableInstances(batch);
    report.resumed = ids.filter((id) => !dispatched.has(id)).length;
    dispatch(ids);
  }
  report.durationMs = Date.now() - started;
  return report;
}
