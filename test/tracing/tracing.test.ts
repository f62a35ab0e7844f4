// OpenTelemetry with the SDK's in-memory exporter, on real Postgres: a
// 10-step pipeline driven by the http dispatcher (signed follow-up requests
// into the app) is ONE trace: the start span and 10 step spans under it, one
// activity span per step. Failed attempts and compensations get their own
// spans.
import * as otel from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { workflows as examples } from "../../functions/workflows/index.ts";
import { createEdda, engineOf, type Edda } from "../../src/edda.ts";
import type { Database } from "../../src/storage/database.ts";
import { freshPostgres } from "../support/engine.ts";

const workflows = examples;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let database: Database;
let edda: Edda;

beforeAll(async () => {
  otel.trace.setGlobalTracerProvider(provider);
  database = (await freshPostgres("tracing")).open();
  edda = createEdda({
    workflows,
    database,
    secret: "trace-secret",
    tracing: otel,
    dispatcher: { http: { baseUrl: "http://edda.test", fetch: async (input, init) => edda.app.request(String(input), init) } },
  });
}, 120_000);
afterAll(async () => {
  await edda?.close();
  await database?.close();
  otel.trace.disable();
});
beforeEach(() => exporter.reset());

async function settle(id: string, statuses = ["completed", "failed", "cancelled"], sweep = false) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    // The http dispatcher bounds a chain of follow-ups (hops); the sweep resumes the rest, as cron does.
    if (sweep) await edda.sweep({ resumeIdleSeconds: 0 });
    const inst = await edda.getInstance(id);
    if (inst && statuses.includes(inst.status)) return inst;
    if (Date.now() > deadline) throw new Error(`${id} is ${inst?.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
const ofInstance = (id: string) => exporter.getFinishedSpans().filter((s) => s.attributes["edda.instance.id"] === id);
const parentId = (s: ReadableSpan) => s.parentSpanContext?.spanId;

it("a 10-step pipeline over the http dispatcher is one trace with 10 step spans", async () => {
  await edda.start("pipeline", { steps: 10 }, { instanceId: "trace-pipe" });
  expect((await settle("trace-pipe", undefined, true)).output).toEqual({ completed: 10 });
  await new Promise((r) => setTimeout(r, 100));
  const spans = ofInstance("trace-pipe");
  expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);
  const start = spans.filter((s) => s.name === "edda.start pipeline");
  expect(start).toHaveLength(1);
  // Steps that did work (a sweep may also knock on an instance another step holds: "skipped").
  const steps = spans.filter((s) => s.name.startsWith("edda.step") && s.attributes["edda.step.result"] === "concluded");
  expect(steps).toHaveLength(10);
  for (const s of steps) {
    expect(parentId(s)).toBe(start[0]!.spanContext().spanId);
    expect(s.attributes["edda.instance.id"]).toBe("trace-pipe");
  }
  const activities = spans.filter((s) => s.name === "edda.activity pipeline_step");
  expect(activities).toHaveLength(10);
  const stepIds = new Set(spans.filter((s) => s.name.startsWith("edda.step")).map((s) => s.spanContext().spanId));
  for (const a of activities) {
    expect(stepIds.has(parentId(a)!)).toBe(true);
    expect(a.attributes).toMatchObject({ "edda.workflow.name": "pipeline", "edda.activity.name": "pipeline_step", "edda.activity.attempt": 1 });
  }
});

it("a failing saga: compensation spans in the run's trace, the failure recorded", async () => {
  await edda.start("order_saga", { orderId: "t-fail", amount: 5, failAt: "shipping" }, { instanceId: "trace-saga" });
  const done = await settle("trace-saga");
  await new Promise((r) => setTimeout(r, 100));
  const spans = ofInstance("trace-saga");
  expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);
  expect(done.status).toBe("failed");
  expect(spans.filter((s) => s.name.startsWith("edda.compensation")).map((s) => s.name)).toEqual(["edda.compensation refund_payment", "edda.compensation release_inventory"]);
  expect(spans.find((s) => s.name === "edda.activity ship_order")?.status.code).toBe(otel.SpanStatusCode.ERROR);
});

it("a wait gets an edda.wait span, and the step that resumes it joins the same trace (stored trace context)", async () => {
  await edda.start("approval", { requestId: "t", timeoutSeconds: 600 }, { instanceId: "trace-wait" });
  await settle("trace-wait", ["waiting_for_message"]);
  await new Promise((r) => setTimeout(r, 100));
  expect(ofInstance("trace-wait").some((s) => s.name === "edda.wait message")).toBe(true);
  const trace = ofInstance("trace-wait")[0]!.spanContext().traceId;
  const engine = await engineOf(edda);
  await engine.publish("approval", { approved: true, approver: "t" }, { targetInstanceId: "trace-wait" });
  await settle("trace-wait");
  await new Promise((r) => setTimeout(r, 100));
  const spans = ofInstance("trace-wait");
  expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set([trace]));
  expect(spans.filter((s) => s.name.startsWith("edda.step")).length).toBeGreaterThanOrEqual(2);
});
