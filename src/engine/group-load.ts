/**
 * Group load: the handed-off leases of steps that start in the same turn of
 * the event loop are read in one statement.
 *
 * A per-request step starts cold: it reads its instance and history under the
 * lease its follow-up names (storage `loadLeased`), one statement each. The
 * steps of a Queue consumer's batch, or of a follow-up request that carries
 * several, start together, so their reads queue until the turn's I/O
 * callbacks have run (as group commit's conclusions do, group-commit.ts) and
 * go as one `loadLeasedMany`: every fence checked on its own row, each step
 * given its own answer. A read takes no lock and writes nothing, so a group
 * that fails fails each of its steps the way its own read would have (the
 * step recovers as it does from that error); at most `maxBatch` go in one
 * statement, and an instance appears once per statement.
 */
import type { Fence, LeasedInstance, Storage } from "../storage/types.ts";
import type { LeasedReads } from "./deps.ts";
import { TurnQueue } from "./group-commit.ts";

interface Pending {
  fence: Fence;
  resolve(r: LeasedInstance | null): void;
  reject(e: unknown): void;
}

/** Counts since the engine started: statements sent for handed-off reads, and the reads in them. */
export interface GroupLoadStats {
  statements: number;
  loads: number;
}

export class GroupLoad implements LeasedReads {
  readonly stats: GroupLoadStats = { statements: 0, loads: 0 };
  private readonly queue: TurnQueue<Pending>;

  constructor(
    private readonly storage: Storage,
    maxBatch?: number,
  ) {
    this.queue = new TurnQueue((batch) => this.send(batch), maxBatch);
  }

  /** `loadLeased(fence)`, read with the others of this turn. */
  load(fence: Fence): Promise<LeasedInstance | null> {
    return new Promise<LeasedInstance | null>((resolve, reject) => this.queue.push({ fence, resolve, reject }));
  }

  private async send(batch: Pending[]): Promise<void> {
    this.stats.statements++;
    this.stats.loads += batch.length;
    if (batch.length === 1) {
      const only = batch[0]!;
      return this.storage.loadLeased(only.fence).then(only.resolve, only.reject);
    }
    try {
      const loads = await this.storage.loadLeasedMany(batch.map((p) => p.fence));
      batch.forEach((p, i) => {
        const l = loads[i]!;
        if (l.ok) p.resolve(l.leased);
        else p.reject(l.error);
      });
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }
}
