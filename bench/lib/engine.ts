/**
 * Engine-side helpers shared by the scenarios (and the chaos driver): a
 * migrated postgres.js database, a LocalDispatcher that times every step and
 * can hold work back until released, a dispatcher that only records, and a
 * completion tracker fed by the engine hooks (no polling load on the database).
 */
import { LocalDispatcher, type LocalDispatcherOptions } from "../../src/engine/dispatcher.ts";
import type { Dispatcher, DispatchScope, StepRequest, StepRunner } from "../../src/engine/dispatcher.ts";
import type { EngineHooks } from "../../src/engine/hooks.ts";
import type { Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { nowMs, sleepMs } from "./stats.ts";

/** Migrates `url` over a short-lived connection (so its stats are flushed before a reset). */
export async function migrateDatabase(url: string): Promise<void> {
  const setup = createPostgresJsDatabase({ url, max: 1 });
  try {
    await migrate(setup.db);
  } finally {
    await setup.close();
  }
  await sleepMs(200); // let the backend exit and report its counters
}

export function openEngineDatabase(url: string, pool: number): Database {
  return createPostgresJsDatabase({ url, max: pool });
}

/** LocalDispatcher + per-step service time (lease/history read → commit) + an optional hold. */
export class BenchDispatcher extends LocalDispatcher {
  readonly stepMs: number[] = [];
  concluded = 0;
  skipped = 0;
  /** Dispatches without a handed lease (wake-ups, starts) and when the last one came. */
  fresh = 0;
  lastFreshMs = 0;
  private held: [StepRequest, DispatchScope | undefined][] | null = null;

  constructor(opts: LocalDispatcherOptions = {}) {
    super(opts);
  }

  protected override async runOne(runner: StepRunner, req: StepRequest, scope?: DispatchScope): Promise<unknown> {
    const t0 = nowMs();
    const r = (await runner.runStep(req, scope)) as { status?: string };
    this.stepMs.push(nowMs() - t0);
    if (r?.status === "concluded") this.concluded++;
    else this.skipped++;
    return r;
  }

  override dispatch(req: StepRequest, scope?: DispatchScope): void {
    if (!req.lease) {
      this.fresh++;
      this.lastFreshMs = nowMs();
    }
    if (this.held) this.held.push([req, scope]);
    else super.dispatch(req, scope);
  }

  /** Queue dispatches instead of running them, until `release()`. */
  hold(): void {
    this.held ??= [];
  }

  release(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const [req, scope] of held) super.dispatch(req, scope);
  }

  resetStats(): void {
    this.stepMs.length = 0;
    this.concluded = 0;
    this.skipped = 0;
  }
}

/** Records dispatches without running them: the caller drives `runStep` itself. */
export class RecordingDispatcher implements Dispatcher {
  readonly last = new Map<string, StepRequest>();
  attach(): void {}
  dispatch(req: StepRequest): void {
    this.last.set(req.instanceId, req);
  }
  take(instanceId: string): StepRequest {
    const req = this.last.get(instanceId) ?? { instanceId };
    this.last.delete(instanceId);
    return req;
  }
}

export interface CompletionTracker {
  hooks: EngineHooks;
  readonly completed: number;
  readonly failed: number;
  /** Resolves once `n` workflows completed (counted since creation or `reset`). */
  waitFor(n: number, timeoutMs: number): Promise<void>;
  reset(): void;
}

export function completionTracker(): CompletionTracker {
  let completed = 0;
  let failed = 0;
  let waiter: { n: number; resolve: () => void } | null = null;
  const check = () => {
    if (waiter && completed >= waiter.n) {
      waiter.resolve();
      waiter = null;
    }
  };
  return {
    hooks: {
      onWorkflowComplete: () => {
        completed++;
        check();
      },
      onWorkflowFailed: () => void failed++,
    },
    get completed() {
      return completed;
    },
    get failed() {
      return failed;
    },
    waitFor(n, timeoutMs) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`only ${completed}/${n} workflows completed (${failed} failed) after ${timeoutMs} ms`)), timeoutMs);
        waiter = {
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        };
        check();
      });
    },
    reset() {
      completed = 0;
      failed = 0;
    },
  };
}
