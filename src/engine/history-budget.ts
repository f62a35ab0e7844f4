/**
 * Whether an instance's history nears the size a cold step can replay within the CPU one invocation may
 * spend on this platform (`cpuBudgetMs`: the Workers Free plan's 10 ms by default on Workers). Every step
 * on Workers, Deno Deploy and behind a queue replays the whole current run cold; its CPU grows with the
 * history at the cost the replay scenario measured (replay-cost.gen.ts, written by
 * bench/per-request-report.ts from a bench run — the figures README's "When to recur" gives). Past the
 * budget the platform ends the invocation and the step never concludes: a loop should `ctx.recur` first.
 */
import { REPLAY_COST } from "./replay-cost.gen.ts";
import type { HistoryBudget } from "./why-view.ts";

export type { HistoryBudget };

/** Warned of at this share of the entries that fit. */
export const NEAR_SHARE = 0.8;


/** Entries a cold step replays within `cpuBudgetMs` at `cost` (0 when the step alone spends it). */
export function entriesWithin(cpuBudgetMs: number, cost: { cpuUsPerEntry: number; stepCpuMs: number } = REPLAY_COST): number {
  return Math.max(0, Math.floor(((cpuBudgetMs - cost.stepCpuMs) * 1000) / cost.cpuUsPerEntry));
}

/** The warning for a history of `entries` under `cpuBudgetMs`, or null when it is not near (or no budget is known). */
export function historyBudget(entries: number, cpuBudgetMs: number | null, cost: { cpuUsPerEntry: number; stepCpuMs: number } = REPLAY_COST): HistoryBudget | null {
  if (cpuBudgetMs === null || cpuBudgetMs <= 0) return null;
  const fitsEntries = entriesWithin(cpuBudgetMs, cost);
  if (entries < fitsEntries * NEAR_SHARE) return null;
  const estimatedCpuMs = Math.round((cost.stepCpuMs + (entries * cost.cpuUsPerEntry) / 1000) * 10) / 10;
  const where = entries >= fitsEntries ? "past" : "near";
  return {
    entries,
    estimatedCpuMs,
    cpuBudgetMs,
    fitsEntries,
    detail:
      `its history holds ${entries.toLocaleString("en-US")} entries, ${where} the ${fitsEntries.toLocaleString("en-US")} a cold step replays within this platform's ${cpuBudgetMs.toLocaleString("en-US")} ms of CPU per invocation ` +
      `(about ${estimatedCpuMs} ms at ${cost.cpuUsPerEntry} µs per entry): have the workflow ctx.recur(input) before then (README, When to recur), or raise the budget (EDDA_CPU_BUDGET_MS; Workers paid plans allow 30 s by default)`,
  };
}
