// A failed-attempt history row for pure tests.
import type { HistoryEvent as Row } from "../../src/core/model.ts";

export function attemptRow(activityId: string, createdAt: Date): Row {
  return { id: 0, activityId, eventType: "ActivityAttemptFailed", data: { type: "json", json: "{}" }, createdAt };
}
