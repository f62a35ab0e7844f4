/**
 * Retry policy math (pure). Edda's defaults: 1 s initial interval, coefficient
 * 2, 60 s cap, 5 attempts, 300 s total. Precedence: activity → app → built-in.
 */
export interface RetryPolicy {
  initialIntervalSeconds?: number;
  backoffCoefficient?: number;
  maxIntervalSeconds?: number;
  /** Total attempts including the first (1 = no retry). */
  maxAttempts?: number;
  /** Stop retrying once this long has passed since the first attempt. */
  maxDurationSeconds?: number;
  /** Only errors with these names are retried (when given). */
  retryableErrors?: string[];
  /** Errors with these names are never retried. */
  nonRetryableErrors?: string[];
}

export const DEFAULT_RETRY_POLICY: Required<Omit<RetryPolicy, "retryableErrors" | "nonRetryableErrors">> &
  Pick<RetryPolicy, "retryableErrors" | "nonRetryableErrors"> = {
  initialIntervalSeconds: 1,
  backoffCoefficient: 2,
  maxIntervalSeconds: 60,
  maxAttempts: 5,
  maxDurationSeconds: 300,
};

export type ResolvedRetryPolicy = typeof DEFAULT_RETRY_POLICY;

export function resolveRetryPolicy(...layers: (RetryPolicy | undefined)[]): ResolvedRetryPolicy {
  const out: ResolvedRetryPolicy = { ...DEFAULT_RETRY_POLICY };
  // later layers are lower precedence: apply from last to first
  for (const layer of [...layers].reverse()) {
    if (!layer) continue;
    for (const [k, v] of Object.entries(layer)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  }
  return out;
}

/** Delay before attempt `attempt + 1`, after `attempt` failures (attempt ≥ 1). */
export function backoffSeconds(policy: ResolvedRetryPolicy, attempt: number): number {
  const raw = policy.initialIntervalSeconds * Math.pow(policy.backoffCoefficient, Math.max(0, attempt - 1));
  return Math.min(raw, policy.maxIntervalSeconds);
}

const NEVER_RETRIED = new Set(["TerminalError", "UnserializableValueError", "PayloadTooLargeError", "NonDeterminismError", "ValidationError", "RetryExhaustedError", "ChannelModeConflictError", "InvalidCloudEventError"]);

export function isRetryable(policy: ResolvedRetryPolicy, errorName: string): boolean {
  if (NEVER_RETRIED.has(errorName)) return false;
  if (policy.nonRetryableErrors?.includes(errorName)) return false;
  if (policy.retryableErrors && !policy.retryableErrors.includes(errorName)) return false;
  return true;
}

/**
 * Decide after `attempts` failed attempts (the latest with `errorName`) whether
 * to schedule another, and after how long. `elapsedSeconds` counts from the
 * first attempt.
 */
export function nextRetry(
  policy: ResolvedRetryPolicy,
  attempts: number,
  errorName: string,
  elapsedSeconds: number,
): { retry: true; delaySeconds: number } | { retry: false; exhausted: boolean } {
  if (!isRetryable(policy, errorName)) return { retry: false, exhausted: false };
  if (attempts >= policy.maxAttempts) return { retry: false, exhausted: true };
  const delaySeconds = backoffSeconds(policy, attempts);
  if (elapsedSeconds + delaySeconds > policy.maxDurationSeconds) return { retry: false, exhausted: true };
  return { retry: true, delaySeconds };
}
