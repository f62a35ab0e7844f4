/**
 * Group commit: the lone conclusions of one engine's steps that are ready in
 * the same turn of the event loop go to the database as one statement.
 *
 * A lone conclusion is one outside any transaction of the step's own (no
 * activity wrote through `ctx.tx`, no parent is told in the same transaction):
 * one autocommitted, fenced statement. On a loopback database that statement
 * per step is the floor of the engine's cost — its round trip, its commit (a
 * WAL flush on durable Postgres), its driver work — so conclusions queued in
 * one turn are written together (storage `concludeSteps`): one multi-row
 * statement, every row under its own lease token, returning the rows whose
 * fence held. Each step still learns whether its own fence held; a row whose
 * fence failed wrote nothing and fails nobody else.
 *
 * The window: conclusions queue until the turn's I/O callbacks have run
 * (`setImmediate`, else a zero timeout), so a lone step waits no longer than
 * that; at most `maxBatch` go in one statement, and an instance appears once
 * per statement (a second conclusion of it goes in another, as one by one).
 *
 * When the grouped statement fails, the database answered with an error, so
 * it wrote nothing: each conclusion is then sent on its own, and each step
 * gets its own outcome (a unique violation, say, fails only its step). When
 * the connection was lost before the answer, the statement may have committed:
 * every step of the group gets that error, as a step concluding alone would,
 * and recovers the way it does (engine/step.ts gives the lease back).
 */
import type { ConcludeResult, Fence, StepConclusion, Storage } from "../storage/types.ts";
import type { LoneConclusions } from "./deps.ts";

/** `EngineOptions.groupCommit`. */
export interface GroupCommitOptions {
  /** Conclusions in one statement at most (default 64). */
  maxBatch?: number;
}

export const DEFAULT_MAX_BATCH = 64;

interface Pending {
  fence: Fence;
  conclusion: StepConclusion;
  resolve(r: ConcludeResult): void;
  reject(e: unknown): void;
}

/** Counts since the engine started: statements sent for lone conclusions, and the conclusions in them. */
export interface GroupCommitStats {
  statements: number;
  conclusions: number;
  /** Grouped statements that failed and were sent again one by one. */
  fallbacks: number;
}

/** After the current turn's I/O callbacks: setImmediate, else a zero timeout (workerd). */
export const nextTurn: (fn: () => void) => void =
  typeof globalThis.setImmediate === "function" ? (fn) => void globalThis.setImmediate(fn) : (fn) => void setTimeout(fn, 0);

/** The database answered (an SQLSTATE outside connection failures): a failed statement wrote nothing. */
function answered(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return !/^(08|57P0[123])/.test(code);
  }
  return false;
}

/**
 * The fenced calls of one turn, in batches: pushed items wait until the turn's I/O callbacks have run, then
 * go to `send` at most `maxBatch` at a time, an instance at most once per batch (a second call for it goes in
 * the next). Group commit and group load (group-load.ts) are this queue over their statements.
 */
export class TurnQueue<T extends { fence: Fence }> {
  private queue: T[] = [];
  private scheduled = false;
  readonly maxBatch: number;

  constructor(
    private readonly send: (batch: T[]) => Promise<void>,
    maxBatch = DEFAULT_MAX_BATCH,
  ) {
    this.maxBatch = Math.max(1, Math.trunc(maxBatch));
  }

  push(item: T): void {
    this.queue.push(item);
    if (!this.scheduled) {
      this.scheduled = true;
      nextTurn(() => this.flush());
    }
  }

  private flush(): void {
    this.scheduled = false;
    let rest = this.queue;
    this.queue = [];
    while (rest.length > 0) {
      const batch: T[] = [];
      const later: T[] = [];
      const seen = new Set<string>();
      for (const p of rest) {
        if (batch.length < this.maxBatch && !seen.has(p.fence.instanceId)) {
          seen.add(p.fence.instanceId);
          batch.push(p);
        } else later.push(p);
      }
      void this.send(batch);
      rest = later;
    }
  }
}

export class GroupCommit implements LoneConclusions {
  readonly stats: GroupCommitStats = { statements: 0, conclusions: 0, fallbacks: 0 };
  private readonly queue: TurnQueue<Pending>;

  constructor(
    private readonly storage: Storage,
    opts: GroupCommitOptions = {},
  ) {
    this.queue = new TurnQueue((batch) => this.send(batch), opts.maxBatch);
  }

  /** The lone conclusion of one step under `fence`: written with those of this turn, in one statement. */
  conclude(fence: Fence, conclusion: StepConclusion): Promise<ConcludeResult> {
    return new Promise<ConcludeResult>((resolve, reject) => this.queue.push({ fence, conclusion, resolve, reject }));
  }

  private async send(batch: Pending[]): Promise<void> {
    this.stats.statements++;
    this.stats.conclusions += batch.length;
    let results: ConcludeResult[];
    try {
      results = await this.storage.concludeSteps(batch);
    } catch (err) {
      if (batch.length === 1 || !answered(err)) {
        for (const p of batch) p.reject(err);
        return;
      }
      this.stats.fallbacks++;
      this.stats.statements += batch.length;
      await Promise.all(batch.map((p) => this.storage.concludeStep(p.fence, p.conclusion).then(p.resolve, p.reject)));
      return;
    }
    batch.forEach((p, i) => p.resolve(results[i]!));
  }
}
