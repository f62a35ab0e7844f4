/**
 * Edda's error classes. Each is small, has a stable `name` (bundlers minify
 * class names, so it is set explicitly) and says what it means for retries.
 * Recorded errors are serialized with their name and restored as the same class
 * when it is known (see `serialization.ts`).
 */

export class EddaError extends Error {
  override name = "EddaError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Never retried: the activity failed for good. */
export class TerminalError extends EddaError {
  override name = "TerminalError";
}

/**
 * A value Edda must store cannot be held as JSON (a BigInt, a cycle, a
 * function or symbol, a `toJSON` that throws): an activity's result, a
 * workflow's output, the input of a started workflow or child, message or
 * event data. `slot` says which; `cause` is what the encoder threw. Never
 * retried — the same value fails the same way — and catchable in workflow
 * code where the value came from an operation (activity, `invoke`, `publish`).
 */
export class UnserializableValueError extends TerminalError {
  override name = "UnserializableValueError";
  constructor(
    message: string,
    readonly slot: string = "",
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A value over the largest Edda stores (`MAX_VALUE_BYTES`, 32 MiB of JSON text):
 * `slot` names the value, `limit` the bound. Never retried; catchable where the
 * value came from an operation, like UnserializableValueError.
 */
export class PayloadTooLargeError extends UnserializableValueError {
  override name = "PayloadTooLargeError";
  constructor(
    message: string,
    slot: string,
    readonly limit: number,
  ) {
    super(message, slot);
  }
}

/** All retry attempts failed; `cause` is the last error. */
export class RetryExhaustedError extends EddaError {
  override name = "RetryExhaustedError";
  constructor(
    message: string,
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The code at an activity id differs from what the history recorded. Not retried. */
export class NonDeterminismError extends EddaError {
  override name = "NonDeterminismError";
}

/**
 * A child workflow started with `invoke` failed or was cancelled: re-thrown in
 * the parent, `cause` is the child's own error (restored by name).
 */
export class ChildWorkflowError extends EddaError {
  override name = "ChildWorkflowError";
  constructor(
    message: string,
    readonly childInstanceId: string = "",
    readonly childWorkflow: string = "",
    /** `failed` or `cancelled`. */
    readonly childStatus: string = "failed",
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The workflow ran past its `timeoutSeconds`: the run fails (compensations run). */
export class WorkflowTimeoutError extends EddaError {
  override name = "WorkflowTimeoutError";
}

/** One activity attempt ran past the activity's `timeoutSeconds`: a failed attempt, retried under the policy. */
export class ActivityTimeoutError extends EddaError {
  override name = "ActivityTimeoutError";
}

/** A step lost its lease (expired, taken over, or the instance was cancelled): it commits nothing. */
export class LeaseLostError extends EddaError {
  override name = "LeaseLostError";
}

/** `receive` / `waitMessage` timed out. Catchable in workflow code. */
export class MessageTimeoutError extends EddaError {
  override name = "MessageTimeoutError";
}

/** `waitEvent` timed out. Catchable in workflow code. */
export class EventTimeoutError extends MessageTimeoutError {
  override name = "EventTimeoutError";
}

/** A channel is already used with another delivery mode. */
export class ChannelModeConflictError extends EddaError {
  override name = "ChannelModeConflictError";
}

/** Input failed validation (zod) — maps to HTTP 422. */
export class ValidationError extends EddaError {
  override name = "ValidationError";
  constructor(
    message: string,
    readonly issues: unknown[],
  ) {
    super(message);
  }
}

/**
 * A malformed argument that is not a request body (e.g. a list cursor): a
 * ValidationError that maps to HTTP 400 like the other query parameters.
 */
export class InvalidArgumentError extends ValidationError {
  override name = "InvalidArgumentError";
}

/** Unknown workflow, instance… — maps to HTTP 404. */
export class NotFoundError extends EddaError {
  override name = "NotFoundError";
}

/** Operation not allowed in the current state — maps to HTTP 409. */
export class ConflictError extends EddaError {
  override name = "ConflictError";
}

/**
 * Not a valid CloudEvent (CloudEvents 1.0 core spec, JSON format, HTTP
 * binding): names the offending `attribute` and, in a batch, the member's
 * `index`. Never retried: the same event fails the same way.
 */
export class InvalidCloudEventError extends EddaError {
  override name = "InvalidCloudEventError";
  readonly attribute: string | undefined;
  readonly index: number | undefined;
  constructor(message: string, details: { attribute?: string; index?: number } = {}) {
    super(message);
    this.attribute = details.attribute;
    this.index = details.index;
  }
}

/** A deployment setting is missing or malformed: `variable` says which (its value never leaves the server log). */
export class ConfigurationError extends EddaError {
  override name = "ConfigurationError";
  constructor(
    message: string,
    readonly variable?: string,
  ) {
    super(message);
  }
}

/**
 * A stream refused an item: a chunk over the per-item limit, a stream whose
 * budget is spent, or a write after `close()`. Never retried (the same
 * writes fail the same way); `reason` says which.
 */
export class StreamLimitError extends TerminalError {
  override name = "StreamLimitError";
  constructor(
    message: string,
    readonly reason: "chunk_too_large" | "stream_full" | "closed" | "invalid_topic" = "stream_full",
  ) {
    super(message);
  }
}

export const BUILTIN_ERRORS: Record<string, new (message: string) => Error> = {
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
  EddaError,
  TerminalError,
  UnserializableValueError,
  PayloadTooLargeError: class extends PayloadTooLargeError {
    constructor(message: string) {
      super(message, "", 0);
    }
  },
  NonDeterminismError,
  LeaseLostError,
  MessageTimeoutError,
  EventTimeoutError,
  ChannelModeConflictError,
  NotFoundError,
  ConflictError,
  InvalidCloudEventError,
  ChildWorkflowError,
  WorkflowTimeoutError,
  ActivityTimeoutError,
  StreamLimitError,
  RetryExhaustedError: class extends RetryExhaustedError {
    constructor(message: string) {
      super(message, 0);
    }
  },
};

/**
 * A name stored in a text column (channel, group, event type, target id…):
 * 1–`max` characters and no NUL, which Postgres text cannot hold. Checked at
 * the call, so a bad name is a ValidationError there — never a database error
 * raised later inside a step, where it would look transient and be retried.
 */
export function checkStoredName(what: string, value: unknown, max = 255): asserts value is string {
  if (typeof value !== "string" || value.length === 0 || value.length > max) {
    throw new ValidationError(`${what} must be a non-empty string of at most ${max} characters`, [{ path: [what], message: `1–${max} characters` }]);
  }
  if (value.includes("\u0000")) throw new ValidationError(`${what} must not contain a NUL character (U+0000)`, [{ path: [what], message: "contains U+0000" }]);
}
