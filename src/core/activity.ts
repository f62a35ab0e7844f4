/**
 * The shape of an activity definition, apart from `activity()` that builds
 * one (definitions.ts): the replay core, the operation protocol and the
 * registry speak about activities without importing the module that calls
 * into them, so core has no import circle.
 */
import type { RetryPolicy } from "./retry.ts";
import type { ActivityContext, WorkflowContext } from "./context.ts";

export type ActivityFn<A extends unknown[], R> = (ctx: ActivityContext, ...args: A) => Promise<R> | R;

export interface ActivityOptions<A extends unknown[] = any[], R = any> {
  retry?: RetryPolicy;
  /** Default true: run inside the step's transaction (`ctx.tx`), exactly-once for database effects. */
  transactional?: boolean;
  /**
   * Compensation registered when this activity succeeds; it is called with the
   * activity's result followed by its arguments.
   */
  onFailure?: Activity<[R, ...A], unknown>;
  /**
   * Limit on one attempt: past it the attempt is abandoned (its transaction
   * rolls back) and counts as a failed attempt (ActivityTimeoutError) under
   * the retry policy.
   */
  timeoutSeconds?: number;
}

export interface Activity<A extends unknown[] = any[], R = any> {
  (ctx: WorkflowContext, ...args: A): Promise<R>;
  readonly activityName: string;
  readonly fn: ActivityFn<A, R>;
  readonly options: ActivityOptions<A, R>;
  /** Call with an explicit activity id instead of `name:n`. */
  withId(id: string): (ctx: WorkflowContext, ...args: A) => Promise<R>;
}
