/**
 * Safe code upgrades: `if (await patched(ctx, "charge-v2")) { new path } else
 * { old path }`.
 *
 * A run that reaches the call with no recorded history left (a new run, or an
 * old one that had not got this far before the deploy) takes the new path
 * and records a marker (`patched_{id}`, a ValueRecorded record). A replay
 * whose history holds the marker takes the new path again; a replay of a
 * history recorded by the old code — records still to deliver and no marker
 * anywhere — takes the old path and records nothing. The decision is made
 * once per run and change id; later calls return it.
 *
 * Warm and cold agree: the marker is written at the point the warm run
 * decided, so a cold replay of that history finds it.
 */
import type { WorkflowContext } from "./context.ts";
import { encodeIdPart } from "./ids.ts";
import { EV } from "./model.ts";
import { operation, replayStateOf } from "./operation.ts";
import type { ReplayState } from "./replay.ts";

const decided = new WeakMap<ReplayState, Map<string, Promise<boolean>>>();

/** True on the new code path, false while replaying a history recorded before the change. */
export function patched(ctx: WorkflowContext, changeId: string): Promise<boolean> {
  if (typeof changeId !== "string" || changeId.length === 0) throw new TypeError("patched: a non-empty change id is required");
  const state = replayStateOf(ctx);
  let byId = decided.get(state);
  if (!byId) decided.set(state, (byId = new Map()));
  const known = byId.get(changeId);
  if (known) return known;
  const id = `patched_${encodeIdPart(changeId)}`;
  const result =
    !state.hasRecord(id) && state.isReplaying
      ? Promise.resolve(false)
      : operation<boolean>(ctx, {
          id,
          describe: `patched("${changeId}")`,
          request: { kind: "value", produce: () => true },
          decode: (ev) => (ev.eventType === EV.ValueRecorded ? { ok: true, value: true } : { mismatch: `holds a ${ev.eventType} record` }),
        });
  byId.set(changeId, result);
  return result;
}
