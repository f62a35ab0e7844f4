/**
 * The kit's dispatcher: follow-ups wait in a FIFO queue until the kit drains
 * it, one step at a time, so a test sees the same order on every run. Timer
 * wake-up hints are ignored: in test time nothing comes due until `advance`
 * moves the clock, and the advance loop fires what is due then.
 */
import type { Dispatcher, DispatchScope, StepRequest, StepRunner } from "../engine/dispatcher.ts";

export class StepQueue implements Dispatcher {
  private runner: StepRunner | null = null;
  private readonly queue: { req: StepRequest; scope: DispatchScope | undefined }[] = [];
  private readonly background: Promise<unknown>[] = [];
  private closed = false;

  /** `beforeStep` runs before each step (the kit ticks its clock there: clock.ts). */
  constructor(private readonly beforeStep: () => Promise<void> = async () => {}) {}

  /**
   * The scope of everything the kit invokes: work the engine does after a
   * commit (a channel wake-up after a publish or an event) is handed to
   * `waitUntil` and awaited by `drain`, so a driving call never returns
   * before its wake-ups have dispatched.
   */
  readonly scope: DispatchScope = { waitUntil: (p) => void this.background.push(p.catch(() => undefined)) };

  attach(runner: StepRunner): void {
    this.runner ??= runner;
  }

  dispatch(req: StepRequest, scope?: DispatchScope): void {
    if (!this.closed) this.queue.push({ req, scope });
  }

  get size(): number {
    return this.queue.length;
  }

  /**
   * Run queued steps (and the ones they dispatch) until none is left; returns
   * how many ran. A step that rejects (the engine records step failures
   * itself, so this is a defect or a dead database) is rethrown once the
   * queue is empty; `maxSteps` bounds a workflow that never waits.
   */
  async drain(maxSteps: number): Promise<number> {
    let ran = 0;
    const errors: unknown[] = [];
    while (!this.closed && (this.queue.length || this.background.length)) {
      const next = this.queue.shift();
      if (!next) {
        await Promise.all(this.background.splice(0));
        continue;
      }
      if (++ran > maxSteps) throw new Error(`runUntilIdle: more than ${maxSteps} steps without going idle (a workflow that loops without waiting?)`);
      const runner = next.scope?.runner ?? this.runner;
      try {
        await this.beforeStep();
        await runner?.runStep(next.req, next.scope ?? this.scope);
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, `${errors.length} steps failed`);
    return ran;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.queue.length = 0;
  }
}
