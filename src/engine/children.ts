/**
 * Child workflows in workflow code: `invoke` (start a child and wait for its
 * typed output) and `startChild` (fire and forget).
 *
 * Two operations on the one protocol (core/operation.ts):
 *  - the start is a built-in activity (`child_{workflow}:n`, `edda.start_child`)
 *    run in the parent's step transaction: the child row is created, linked
 *    to its parent, exactly when the parent's step commits (a rolled-back
 *    step starts no child; a replay reads the recorded child id). Starts of
 *    one wave (`Promise.all`) run together in one step. The child id is
 *    `{parent id}:{operation id}` unless given, so it is deterministic.
 *  - `invoke` then waits (`{start id}:result`) for the child's outcome:
 *    `ChildCompleted` returns its output, `ChildFailed` re-throws as
 *    ChildWorkflowError with the child's error as `cause`. The child's
 *    terminal conclusion records the outcome in the waiting parent in the
 *    same transaction (engine/lifecycle.ts), so the parent wakes at once.
 */
import { activity } from "../core/definitions.ts";
import type { Workflow, WorkflowInput, WorkflowOutput } from "../core/definitions.ts";
import type { ActivityContext, WorkflowContext } from "../core/context.ts";
import { ChildWorkflowError, TerminalError } from "../core/errors.ts";
import { fnv1a64 } from "../core/ids.ts";
import { EV, type HistoryEvent } from "../core/model.ts";
import { callActivityAt, operation, operationId, replayStateOf } from "../core/operation.ts";
import type { Decoded } from "../core/replay.ts";
import { fromPayload, type SerializedError } from "../core/serialization.ts";
import { activityInternalsOf, type ChildStart } from "./execute.ts";

export interface ChildOptions {
  /** The child's instance id (default: derived from the parent's id and the operation id). */
  instanceId?: string;
  /** A detached child keeps running when the parent is cancelled or times out. */
  detached?: boolean;
}

export type { ChildStart } from "./execute.ts";

/** The recorded outcome of a child (history payload of ChildCompleted / ChildFailed). */
export interface RecordedChildOutcome {
  name: string;
  instanceId: string;
  status: "completed" | "failed" | "cancelled";
  output?: unknown;
  error?: SerializedError | null;
}

const MAX_ID = 200;

export const startChildActivity = activity(
  "edda.start_child",
  async (ctx: ActivityContext, start: ChildStart) => {
    const rt = activityInternalsOf(ctx);
    if (!rt.notify.startChild) throw new TerminalError("child workflows need the engine's step (no child starter in this context)");
    return rt.notify.startChild(rt.storage, start);
  },
  // What can fail here (unknown workflow, invalid input, an id taken by another instance) fails the same way again.
  { retry: { maxAttempts: 1 } },
);

/** Synchronous (the replay loop waits one macrotask for the code to reach its next operation). */
function childId(parentId: string, opId: string): string {
  const raw = `${parentId}:${opId}`;
  if (raw.length <= MAX_ID && /^[A-Za-z0-9_.:-]+$/.test(raw)) return raw;
  return `${parentId.replace(/[^A-Za-z0-9_.:-]/g, "_").slice(0, 100)}:child-${fnv1a64(raw)}`;
}

function start(ctx: WorkflowContext, child: Workflow, input: unknown, opts: ChildOptions, waits: boolean): { id: string; started: Promise<string> } {
  if (!child || typeof child.workflowName !== "string") throw new TypeError("a child workflow definition (from workflow()) is required");
  const id = operationId(ctx, `child_${child.workflowName}`);
  const resultId = `${id}:result`;
  const instanceId = opts.instanceId ?? childId(ctx.instanceId, id);
  const req: ChildStart = { workflowName: child.workflowName, input: input ?? null, instanceId, parentActivityId: waits ? resultId : null, detached: opts.detached ?? false };
  const started = callActivityAt(ctx, startChildActivity, [req], id);
  return { id: resultId, started };
}

/**
 * Start `child` with `input` and wait for its output. The child's failure or
 * cancellation is re-thrown here as ChildWorkflowError (its error as `cause`).
 */
export async function invoke<W extends Workflow>(ctx: WorkflowContext, child: W, input: WorkflowInput<W>, opts: ChildOptions = {}): Promise<WorkflowOutput<W>> {
  const { id, started } = start(ctx, child, input, opts, true);
  const childInstanceId = await started;
  const state = replayStateOf(ctx);
  return operation<WorkflowOutput<W>>(ctx, {
    id,
    describe: `child workflow "${child.workflowName}"`,
    request: { kind: "wait", wait: { kind: "child", activityId: id, childInstanceId } },
    decode: (ev) => decodeChildRecord(ev, child.workflowName, (e) => state.restoreError(e)),
  });
}

/** Start `child` without waiting for it; returns the child's instance id. */
export function startChild<W extends Workflow>(ctx: WorkflowContext, child: W, input: WorkflowInput<W>, opts: ChildOptions = {}): Promise<string> {
  return start(ctx, child, input, opts, false).started;
}

/** How a child-outcome record settles `invoke`. */
export function decodeChildRecord(ev: HistoryEvent, workflowName: string, restore: (e: SerializedError) => Error): Decoded {
  if (ev.eventType !== EV.ChildCompleted && ev.eventType !== EV.ChildFailed) return { mismatch: `holds a ${ev.eventType} record, not a child outcome` };
  const r = fromPayload(ev.data) as RecordedChildOutcome;
  if (r.name !== workflowName) return { mismatch: `history recorded child workflow "${r.name}" but the code now invokes "${workflowName}"` };
  if (ev.eventType === EV.ChildCompleted) return { ok: true, value: r.output };
  const cause = r.error ? restore(r.error) : undefined;
  const what = r.status === "cancelled" ? "was cancelled" : `failed${cause ? `: ${cause.message}` : ""}`;
  return { ok: false, error: new ChildWorkflowError(`child workflow "${r.name}" (${r.instanceId}) ${what}`, r.instanceId, r.name, r.status, cause ? { cause } : undefined) };
}
