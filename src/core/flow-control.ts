/**
 * Flow-control options of a workflow (pure: definitions and checks; the
 * engine and storage enforce them). Every key is `key(input)`, stored as
 * `{workflow}:{key}` so two workflows never share one.
 */
import { ValidationError } from "./errors.ts";

/** `concurrency`: at most `limit` unfinished instances per key. */
export interface ConcurrencyOption {
  /** The key of a start, from its validated input: a string of 1–200 characters. */
  key: (input: any) => string;
  /** Unfinished, unqueued instances per key. */
  limit: number;
}

/** `rateLimit`: a throttle — starts over the limit wait `queued`. */
export interface RateLimitOption {
  /** The key of a start, from its validated input: a string of 1–200 characters. */
  key: (input: any) => string;
  /** Admissions (starts) per key in any window of `periodSeconds`. */
  limit: number;
  /** The window's length: (0, 7 days]. */
  periodSeconds: number;
}

/** `debounce`: a burst of starts of one key runs once, with the last input. */
export interface DebounceOption {
  /** The key of a start, from its validated input: a string of 1–200 characters. */
  key: (input: any) => string;
  /** The key must be quiet this long before its pending instance starts. */
  periodSeconds: number;
  /** Start at the latest this long after the first start of a burst (default: never forced). */
  maxWaitSeconds?: number;
}

/** `singleton`: one unfinished instance per key; other starts return it. */
export interface SingletonOption {
  /** The key of a start, from its validated input: a string of 1–200 characters. */
  key: (input: any) => string;
}

/** The flow-control options of `workflow(name, options, fn)`. */
export interface FlowControlOptions {
  /**
   * At most `limit` unfinished instances per key are started; later ones
   * wait in status `queued` and start in start order as slots free. A
   * waiting instance keeps its slot (see docs/design.md).
   */
  concurrency?: ConcurrencyOption;
  /**
   * Throttle: at most `limit` instances per key leave the queue in any
   * window of `periodSeconds`; a start over the limit is created `queued`
   * and starts in start order when the window has room. Nothing is dropped.
   */
  rateLimit?: RateLimitOption;
  /**
   * Starts of one key while its instance is pending collapse into that
   * instance (the start returns its id); it runs once, with the last input,
   * when the key was quiet for `periodSeconds` (or `maxWaitSeconds` after
   * the burst's first start).
   */
  debounce?: DebounceOption;
  /** A start while an instance of the key is unfinished returns that instance instead of creating one. */
  singleton?: SingletonOption;
}

/** A week: longer windows belong in a schedule, not an admission rule. */
export const MAX_FLOW_PERIOD_SECONDS = 7 * 24 * 3600;

const isPeriod = (s: unknown) => typeof s === "number" && Number.isFinite(s) && s > 0 && s <= MAX_FLOW_PERIOD_SECONDS;
const isLimit = (n: unknown) => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 1_000_000;

/** At definition time: malformed options and combinations that cannot be enforced together throw a TypeError. */
export function checkFlowControl(name: string, o: FlowControlOptions): void {
  const bad = (what: string) => {
    throw new TypeError(`workflow ${name}: ${what}`);
  };
  const keyed = (opt: { key?: unknown } | undefined) => opt !== undefined && (typeof opt !== "object" || opt === null || typeof opt.key !== "function");
  const { concurrency: cc, rateLimit: rl, debounce: db, singleton: sg } = o;
  if (keyed(cc) || (cc && !isLimit(cc.limit))) bad("concurrency must be { key: (input) => string, limit: a positive integer }");
  if (keyed(rl) || (rl && (!isLimit(rl.limit) || !isPeriod(rl.periodSeconds)))) {
    bad(`rateLimit must be { key: (input) => string, limit: a positive integer, periodSeconds: > 0 and <= ${MAX_FLOW_PERIOD_SECONDS} }`);
  }
  if (keyed(db) || (db && (!isPeriod(db.periodSeconds) || (db.maxWaitSeconds !== undefined && (!isPeriod(db.maxWaitSeconds) || db.maxWaitSeconds < db.periodSeconds))))) {
    bad(`debounce must be { key: (input) => string, periodSeconds: > 0 and <= ${MAX_FLOW_PERIOD_SECONDS}, maxWaitSeconds?: >= periodSeconds }`);
  }
  if (keyed(sg)) bad("singleton must be { key: (input) => string }");
  // One queue per instance: a rate-limited instance waits for its window, a keyed one for a slot; both at once would need two queues agreeing.
  if (cc && rl) bad("concurrency and rateLimit cannot be combined");
  // A debounced start may become another start's input: it has no identity of its own to queue, limit or deduplicate.
  if (db && (cc || rl || sg)) bad("debounce cannot be combined with concurrency, rateLimit or singleton");
}

/** `{workflow}:{key(input)}`; a key function that throws or returns no usable string is a ValidationError (nothing is stored). */
export function flowKey(workflowName: string, option: keyof FlowControlOptions, key: (input: any) => string, input: unknown): string {
  const refuse = (message: string) => new ValidationError(`workflow "${workflowName}": ${option}.key(input) ${message}`, [{ path: ["input"], message: `invalid ${option} key` }]);
  let k: unknown;
  try {
    k = key(input);
  } catch (err) {
    throw refuse(`threw: ${err instanceof Error ? err.message : String(err)}`.slice(0, 500));
  }
  if (typeof k !== "string" || k.length === 0 || k.length > 200) throw refuse("must return a non-empty string of at most 200 characters");
  return `${workflowName}:${k}`;
}
