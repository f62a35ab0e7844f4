/**
 * Warm runs: a workflow run kept in memory between a step and the follow-up
 * it handed its lease to, when that follow-up lands in the same process (the
 * local dispatcher, or an http follow-up that comes back to this server).
 *
 * The follow-up then skips loading and replaying the history: the run is
 * already suspended at its next operation, with the values a replay would
 * give. Safety does not depend on the cache: the entry is keyed by the handed
 * fencing token, and the step's conclusion is still fenced by it, so if
 * anything touched the instance meanwhile (cancel, stale-lease release,
 * take-over) the token moved on and the conclusion commits nothing.
 *
 * A start made on this engine with the local dispatcher leaves an entry with
 * no run (`run: null`): the instance it just created, leased for its first
 * step, whose history is empty — that step replays from nothing without a read.
 */
import type { ReplayResult, ReplayRun } from "../core/replay.ts";
import type { InstanceRecord } from "../storage/types.ts";

export interface WarmRun {
  workerId: string;
  token: number;
  instance: InstanceRecord;
  /** Null for a fresh start: nothing has run, the history is empty. */
  run: ReplayRun | null;
  /** Where the run stopped; its compensations were persisted by the previous step (null with `run`). */
  next: ReplayResult | null;
  expiresAt: number;
}

export class WarmRuns {
  private readonly runs = new Map<string, WarmRun>();
  /** Follow-ups that continued a warm run (observability, tests). */
  hits = 0;

  constructor(private readonly max = 10_000) {}

  put(instanceId: string, run: WarmRun): void {
    this.runs.delete(instanceId);
    // Entries are in insertion order: drop the expired ones at the front (follow-ups that never came).
    const now = Date.now();
    for (const [id, w] of this.runs) {
      if (w.expiresAt > now) break;
      this.runs.delete(id);
    }
    if (this.runs.size >= this.max) {
      const oldest = this.runs.keys().next();
      if (!oldest.done) this.runs.delete(oldest.value);
    }
    this.runs.set(instanceId, run);
  }

  /** The run handed with this lease, at most once. */
  take(instanceId: string, lease: { workerId: string; token: number }): WarmRun | null {
    const w = this.runs.get(instanceId);
    if (!w) return null;
    this.runs.delete(instanceId);
    if (w.token !== lease.token || w.workerId !== lease.workerId || w.expiresAt <= Date.now()) return null;
    this.hits++;
    return w;
  }

  drop(instanceId: string): void {
    this.runs.delete(instanceId);
  }

  get size(): number {
    return this.runs.size;
  }
}
