/**
 * Recorded histories for CI: `capture` turns an instance's stored history
 * into plain JSON (a folder of these is what a team keeps), `verifyHistories`
 * replays each against the workflows as they are now — the same check as
 * `edda-edge verify-replay` (engine/verify.ts), without a database.
 */
import type { Workflow } from "../core/definitions.ts";
import { decodeBase64, encodeBase64 } from "../core/cloudevent-syntax.ts";
import type { Payload } from "../core/model.ts";
import type { ErrorClass } from "../core/serialization.ts";
import { verifyReplay } from "../engine/verify.ts";
import type { HistoryEvent, InstanceRecord } from "../storage/types.ts";

/** One instance's history as JSON: what `t.capture(id)` returns and `t.verifyReplay` reads. */
export interface RecordedHistory {
  format: "edda-history/1";
  instanceId: string;
  workflowName: string;
  run: number;
  /** The stored input, as JSON text. */
  inputData: string;
  events: RecordedEvent[];
}

export interface RecordedEvent {
  id: number;
  activityId: string;
  eventType: string;
  /** The stored payload: JSON text, or bytes in base64. */
  data: { type: "json"; json: string } | { type: "binary"; base64: string };
  createdAt: string;
}

export interface ReplayCheck {
  instanceId: string;
  workflowName: string;
  ok: boolean;
  /** Where the replay stops (the next thing the run would do), or why it diverges. */
  detail: string;
}

export interface ReplayReport {
  /** True when every history replays against the current code. */
  ok: boolean;
  checked: number;
  diverging: ReplayCheck[];
  results: ReplayCheck[];
}

export function recordHistory(instance: Pick<InstanceRecord, "instanceId" | "workflowName" | "run" | "inputData">, events: HistoryEvent[]): RecordedHistory {
  return {
    format: "edda-history/1",
    instanceId: instance.instanceId,
    workflowName: instance.workflowName,
    run: instance.run,
    inputData: instance.inputData,
    events: events.map((e) => ({
      id: e.id,
      activityId: e.activityId,
      eventType: e.eventType,
      data: e.data.type === "json" ? { type: "json", json: e.data.json } : { type: "binary", base64: encodeBase64(e.data.bytes) },
      createdAt: e.createdAt.toISOString(),
    })),
  };
}

function payloadOf(d: RecordedEvent["data"], where: string): Payload {
  if (d?.type === "json" && typeof d.json === "string") return { type: "json", json: d.json };
  const bytes = d?.type === "binary" && typeof d.base64 === "string" ? decodeBase64(d.base64) : null;
  if (!bytes) throw new TypeError(`verifyReplay: ${where} has no readable data`);
  return { type: "binary", bytes };
}

export async function verifyHistories(workflows: ReadonlyMap<string, Workflow>, histories: readonly RecordedHistory[], errorClasses: Record<string, ErrorClass>): Promise<ReplayReport> {
  const results: ReplayCheck[] = [];
  for (const h of histories) {
    if (h?.format !== "edda-history/1" || !Array.isArray(h.events)) throw new TypeError("verifyReplay: not a recorded history (format edda-history/1, from t.capture)");
    const base = { instanceId: h.instanceId, workflowName: h.workflowName };
    const wf = workflows.get(h.workflowName);
    if (!wf) {
      results.push({ ...base, ok: false, detail: `workflow "${h.workflowName}" is not among the kit's workflows` });
      continue;
    }
    const events: HistoryEvent[] = h.events.map((e, i) => ({ id: e.id, activityId: e.activityId, eventType: e.eventType, data: payloadOf(e.data, `${h.instanceId} event ${i}`), createdAt: new Date(e.createdAt) }));
    const instance = { instanceId: h.instanceId, workflowName: h.workflowName, run: h.run, inputData: h.inputData } as InstanceRecord;
    const verdict = await verifyReplay(wf, instance, events, errorClasses);
    results.push({ ...base, ok: verdict.ok, detail: verdict.ok ? verdict.next : verdict.error });
  }
  const diverging = results.filter((r) => !r.ok);
  return { ok: diverging.length === 0, checked: results.length, diverging, results };
}
