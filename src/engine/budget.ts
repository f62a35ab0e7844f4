/**
 * One subrequest budget per invocation. Workers cap the outgoing requests of
 * an invocation (50 on the Free plan); every fetch the engine makes on behalf
 * of an invocation — follow-up steps, outbox deliveries, queue sends — takes
 * from the same budget, so one busy step cannot starve the relay of another
 * and nothing is sent that the platform would refuse. Work that finds the
 * budget spent is left in the database for a later invocation.
 */
export class SubrequestBudget {
  private used = 0;

  /** `limit`: Infinity where the platform has none (Node, Deno). */
  constructor(readonly limit: number = Infinity) {
    if (!(limit >= 0)) throw new TypeError(`a subrequest budget must be ≥ 0, got ${limit}`);
  }

  get remaining(): number {
    return Math.max(0, this.limit - this.used);
  }

  get spent(): number {
    return this.used;
  }

  /** Take `n` subrequests if they are left; false (and nothing taken) otherwise. */
  take(n = 1): boolean {
    if (this.used + n > this.limit) return false;
    this.used += n;
    return true;
  }

  /** Give back what a send that never left took (e.g. the platform refused it). */
  refund(n = 1): void {
    this.used = Math.max(0, this.used - n);
  }
}

/** True for the error a platform throws when an invocation made too many subrequests. */
export function isSubrequestLimitError(err: unknown): boolean {
  const text = err instanceof Error ? `${err.name} ${err.message}` : String(err);
  return /too many subrequests|subrequest limit|exceeded.*subrequests/i.test(text);
}
