// How a stored instance row is shown (engine/views.ts toView), pure: payloads
// decoded, the error through the stored-error view (no stack unless asked),
// `runnable` only for a running or compensating instance whose lease is free
// or expired, flow-control keys without their `{workflow}:` prefix, a rerun's
// and a fork's origin, and the last failure read defensively from whatever
// the row holds. The rows themselves come from Postgres in the engine tier.
import { describe, expect, it } from "vitest";
import { instanceErrorData, toJson } from "../../src/core/serialization.ts";
import { failureView, toView } from "../../src/engine/views.ts";
import type { InstanceRecord } from "../../src/storage/records.ts";

const at = new Date("2026-12-04T12:00:00.000Z");
const row = (over: Partial<InstanceRecord> = {}): InstanceRecord => ({
  instanceId: "i-1",
  workflowName: "order_saga",
  sourceHash: "h",
  deployment: null,
  replayRefusedBy: null,
  replayRefusedError: null,
  ownerService: "edda-edge",
  status: "running",
  currentActivityId: "charge:1",
  run: 0,
  startedAt: at,
  updatedAt: at,
  inputData: toJson({ orderId: "o-1", raw: new Uint8Array([1, 2]) }),
  outputData: null,
  errorData: null,
  cancelData: null,
  lockedBy: null,
  lockedAt: null,
  lockToken: 0,
  lockExpiresAt: null,
  lockTimeoutSeconds: null,
  parentInstanceId: null,
  parentActivityId: null,
  detached: false,
  deadlineAt: null,
  parkedHash: null,
  failureCount: 0,
  failureData: null,
  concurrencyKey: null,
  rateKey: null,
  admittedAt: null,
  singletonKey: null,
  debounceKey: null,
  notBefore: null,
  originInstanceId: null,
  originKind: null,
  originActivityId: null,
  priority: 0,
  ...over,
});

describe("instance views", () => {
  it("decodes payloads and shows times as ISO text", () => {
    const v = toView(row({ outputData: toJson({ at }), status: "completed" }));
    expect(v).toMatchObject({ instanceId: "i-1", workflowName: "order_saga", status: "completed", input: { orderId: "o-1", raw: new Uint8Array([1, 2]) }, output: { at }, startedAt: at.toISOString(), error: null, flowControl: null, rerunOf: null, forkOf: null });
  });

  it("runnable: running or compensating, and the lease free or expired", () => {
    const past = new Date(Date.now() - 1000);
    const future = new Date(Date.now() + 60_000);
    expect(toView(row()).runnable).toBe(true);
    expect(toView(row({ status: "compensating", lockedBy: "w", lockExpiresAt: past })).runnable).toBe(true);
    expect(toView(row({ lockedBy: "w", lockExpiresAt: future })).runnable).toBe(false);
    expect(toView(row({ lockedBy: "w", lockExpiresAt: null })).runnable).toBe(false);
    for (const status of ["waiting_for_timer", "queued", "completed", "parked"] as const) expect(toView(row({ status })).runnable, status).toBe(false);
  });

  it("the stored error without its stack unless asked", () => {
    const errorData = instanceErrorData(Object.assign(new TypeError("no stock"), { code: "E_STOCK" }));
    const quiet = toView(row({ status: "failed", errorData }));
    expect(quiet.error).toMatchObject({ error_type: "TypeError", error_message: "no stock", fields: { code: "E_STOCK" } });
    expect(quiet.error).not.toHaveProperty("stack");
    expect(toView(row({ status: "failed", errorData }), { stacks: true }).error).toHaveProperty("stack", expect.stringContaining("TypeError: no stock"));
  });

  it("flow-control keys without the workflow's prefix; a rerun's and a fork's origin", () => {
    const v = toView(row({ concurrencyKey: "order_saga:eu", singletonKey: "order_saga:a:b", admittedAt: at }));
    expect(v.flowControl).toEqual({ concurrencyKey: "eu", rateKey: null, admittedAt: at.toISOString(), singletonKey: "a:b", debounceKey: null, notBefore: null });
    expect(toView(row({ originKind: "rerun", originInstanceId: "i-0" }))).toMatchObject({ rerunOf: "i-0", forkOf: null });
    expect(toView(row({ originKind: "fork", originInstanceId: "i-0", originActivityId: "charge:1" }))).toMatchObject({ rerunOf: null, forkOf: { instanceId: "i-0", fromActivityId: "charge:1" } });
  });

  it("the last failure, read from whatever the row holds", () => {
    expect(failureView(null)).toBeNull();
    expect(failureView(toJson({ task: "timers", error_type: "PostgresError", message: "boom", at: "2026-12-04T12:00:00Z", attempts: 3, previous_status: "waiting_for_timer" }))).toEqual({ task: "timers", errorType: "PostgresError", message: "boom", at: "2026-12-04T12:00:00Z", attempts: 3, previousStatus: "waiting_for_timer" });
    expect(failureView(toJson({ attempts: "many", message: 5 }))).toEqual({ task: "", errorType: "", message: "", at: "", attempts: 0, previousStatus: null });
    expect(failureView(toJson("garbage"))).toBeNull();
  });
});
