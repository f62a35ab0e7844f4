// The wait kinds: declared once in the model (core/model.ts WAIT_KINDS), with
// the engine's table of handlers a mapped type over them (engine/wait-kinds.ts):
// a table missing a kind, a handler, or the expiry of a kind that declares one
// does not compile (the expected type errors below fail the type check if such
// a table compiled), and every list that names the kinds is derived from the
// declaration: the statuses, the instance table's CHECK, the records replay
// treats as primary, the sweep's expiry tasks and counters.
import { getTableConfig, PgDialect } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import { CANCELLABLE_STATUSES, HOOK_LISTENING_STATUSES, INSTANCE_STATUSES, WAIT_EVENTS, WAIT_KINDS, WAIT_STATUSES, waitKindOf } from "../../src/core/model.ts";
import { decide, waitingPlan } from "../../src/engine/decide.ts";
import { EXPIRIES, WAIT_HANDLERS, type WaitKindTable } from "../../src/engine/wait-kinds.ts";
import { workflowInstances } from "../../src/storage/schema.ts";

describe("wait kinds", () => {
  it("a table of handlers without a row for every declared kind, or without a kind's declared expiry, does not compile", () => {
    // @ts-expect-error the child and webhook rows are missing
    const incomplete: WaitKindTable = { timer: WAIT_HANDLERS.timer, message: WAIT_HANDLERS.message };
    // @ts-expect-error a row without its conclude handler
    const partial: WaitKindTable = { ...WAIT_HANDLERS, child: { ...WAIT_HANDLERS.child, conclude: undefined } };
    // @ts-expect-error the timer kind declares an expiry, so its row must say how it expires
    const noExpiry: WaitKindTable = { ...WAIT_HANDLERS, timer: { ...WAIT_HANDLERS.timer, expire: null } };
    // @ts-expect-error the child kind declares none, so its row has no expiry handlers
    const extraExpiry: WaitKindTable = { ...WAIT_HANDLERS, child: { ...WAIT_HANDLERS.child, expire: WAIT_HANDLERS.timer.expire } };
    expect(Object.keys(incomplete)).toEqual(["timer", "message"]);
    expect(partial.child.conclude).toBeUndefined();
    expect(noExpiry.timer.expire).toBeNull();
    expect(extraExpiry.child.expire).not.toBeNull();
    expect(Object.keys(WAIT_HANDLERS)).toEqual(Object.keys(WAIT_KINDS));
  });

  it("each kind has its own waiting status, one the instance table's CHECK accepts and cancel applies to, found back from it", () => {
    const statuses = Object.values(WAIT_KINDS).map((k) => k.status);
    expect(new Set(statuses).size).toBe(statuses.length);
    expect(WAIT_STATUSES).toEqual(statuses);
    for (const [kind, row] of Object.entries(WAIT_KINDS)) {
      expect(INSTANCE_STATUSES).toContain(row.status);
      expect(CANCELLABLE_STATUSES).toContain(row.status);
      expect(waitKindOf(row.status)?.kind).toBe(kind);
    }
    expect(waitKindOf("running")).toBeUndefined();
    const check = getTableConfig(workflowInstances).checks.find((c) => c.name === "valid_status")!;
    const listed = [...new PgDialect().sqlToQuery(check.value).sql.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]);
    expect(listed).toEqual([...INSTANCE_STATUSES]);
  });

  it("the records that settle a wait, and the kinds a webhook branch stands beside, come from the declaration", () => {
    expect(WAIT_EVENTS).toEqual(["TimerExpired", "MessageReceived", "MessageTimeout", "ChildCompleted", "ChildFailed", "WebhookReceived", "WebhookExpired"]);
    expect(HOOK_LISTENING_STATUSES).toEqual(["waiting_for_message", "waiting_for_webhook"]);
  });

  it("the sweep runs one expiry task per kind that comes due by itself, with the kind's counter and priority", () => {
    expect(EXPIRIES.map((e) => [e.task, e.counter, e.priority])).toEqual([
      ["timers", "timersFired", true],
      ["message_timeouts", "messageWaitsExpired", true],
      ["webhook_expiry", "webhookWaitsExpired", false],
    ]);
    expect(WAIT_KINDS.child.expiry).toBeNull();
    expect(WAIT_HANDLERS.child.expire).toBeNull();
  });

  it("a timer concludes in the decision itself; the kinds that look at the database first are left to their prepare", () => {
    const history = { records: [], compensations: [] };
    const now = Date.parse("2026-12-01T00:00:00Z");
    const timer = decide({ kind: "wait", wait: { kind: "timer", activityId: "sleep:1", delaySeconds: 5 } }, history, { handoffLeaseSeconds: 30, now });
    expect(timer).toMatchObject({ kind: "conclude", conclusion: { status: "waiting_for_timer", timer: { timerId: "sleep:1", delaySeconds: 5 } }, after: { wakeInSeconds: 5 } });
    const until = decide({ kind: "wait", wait: { kind: "timer", activityId: "sleep:2", expiresAt: new Date(now + 7000) } }, history, { handoffLeaseSeconds: 30, now });
    expect(until).toMatchObject({ kind: "conclude", after: { wakeInSeconds: 7 } });
    const message = decide({ kind: "wait", wait: { kind: "message", activityId: "receive_x:1", channel: "x" } }, history, { handoffLeaseSeconds: 30, now });
    expect(message.kind).toBe("wait");
    const waiting = waitingPlan({ kind: "message", activityId: "receive_x:1", channel: "x" }, history, { kind: "waiting", wakeInSeconds: 12 }, now);
    expect(waiting).toMatchObject({ conclusion: { status: "waiting_for_message", currentActivityId: "receive_x:1" }, after: { wakeInSeconds: 12 } });
    expect(waitingPlan({ kind: "child", activityId: "invoke:1", childInstanceId: "c" }, history, { kind: "waiting", wakeInSeconds: null }, now).after).toEqual({});
  });
});
