// OpenTelemetry with the SDK's in-memory exporter, on real Postgres: a
// 10-step pipeline driven by the http dispatcher (signed follow-up requests
// into the app) is ONE trace: the start span and 10 step spans under it, one
// activity span per step. Failed attempts and compensations get their own
// spans. Across services: a CloudEvent's distributed-tracing `traceparent`
// is the parent of the run it starts (a malformed one is ignored: a fresh
// trace), and the CloudEvents a run sends through the outbox carry the
// traceparent of the activity that wrote them.
import * as otel from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { workflows as examples } from "../../functions/workflows/index.ts";
import { createEdda, engineOf, type Edda } from "../../src/edda.ts";
import { activity, sendEventTransactional, workflow } from "../../src/index.ts";
import type { Database } from "../../src/storage/database.ts";
import { startTestBroker, type TestBroker } from "../support/broker.ts";
import { freshPostgres } from "../support/engine.ts";

const tracePing = workflow("trace_ping", { eventHandler: "trace.ping" }, async () => "pong");
const announce = activity("trace_announce", (ctx, orderId: string) => sendEventTransactional(ctx, { type: "ok.order.shipped", source: "/trace", data: { orderId } }));
const traceEmit = workflow("trace_emit", async (ctx, input: { orderId: string }) => announce(ctx, input.orderId));
const workflows = [...examples, tracePing, traceEmit];
let broker: TestBroker;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let database: Database;
let edda: Edda;

beforeAll(async () => {
  otel.trace.setGlobalTracerProvider(provider);
  database = (await freshPostgres("tracing")).open();
  broker = await startTestBroker();
  edda = createEdda({
    workflows,
    database,
    secret: "trace-secret",
    brokerUrl: broker.url,
    tracing: otel,
    dispatcher: { http: { baseUrl: "http://edda.test", fetch: async (input, init) => edda.app.request(String(input), init) } },
  });
}, 120_000);
afterAll(async () => {
  await edda?.close();
  await database?.close();
  await broker?.stop();
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

/** POST one structured CloudEvent of type trace.ping; the instance it started. */
async function ping(id: string, traceparent: string): Promise<string> {
  const r = await edda.app.request("/events", {
    method: "POST",
    headers: { "content-type": "application/cloudevents+json" },
    body: JSON.stringify({ specversion: "1.0", id, source: "/trace-test", type: "trace.ping", data: {}, traceparent }),
  });
  expect(r.status).toBe(202);
  return ((await r.json()) as { instanceId: string }).instanceId;
}

it("a CloudEvent's traceparent extension is the parent of the run it starts", async () => {
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const instanceId = await ping("tr-1", `00-${traceId}-00f067aa0ba902b7-01`);
  expect((await settle(instanceId)).output).toBe("pong");
  await new Promise((r) => setTimeout(r, 100));
  const spans = ofInstance(instanceId);
  expect(spans.filter((s) => s.name.startsWith("edda.step")).length).toBeGreaterThanOrEqual(1);
  expect(spans.every((s) => s.spanContext().traceId === traceId)).toBe(true);
  expect(parentId(spans.find((s) => s.name === "edda.start trace_ping")!)).toBe("00f067aa0ba902b7");
});

it("a malformed or tampered traceparent is ignored: the event is accepted and its run gets a fresh trace of its own", async () => {
  const bad = [
    "garbage",
    "00-zz-00-01",
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // all-zero trace id: invalid
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case: invalid
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // all-zero span id: invalid
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
  ];
  const ids = await Promise.all(bad.map((tp, i) => ping(`tr-bad-${i}`, tp)));
  const traces = new Set<string>();
  for (const id of ids) {
    expect((await settle(id)).output).toBe("pong");
  }
  await new Promise((r) => setTimeout(r, 100));
  for (const id of ids) {
    const spans = ofInstance(id);
    const start = spans.find((s) => s.name === "edda.start trace_ping")!;
    expect(parentId(start)).toBeUndefined();
    expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set([start.spanContext().traceId]));
    expect(start.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(start.spanContext().traceId).not.toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    traces.add(start.spanContext().traceId);
  }
  expect(traces.size).toBe(bad.length);
  // Valid traffic still flows after it, with its own parent.
  const after = await ping("tr-after", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  await settle(after);
  await new Promise((r) => setTimeout(r, 100));
  expect(ofInstance(after).every((s) => s.spanContext().traceId === "0af7651916cd43dd8448eb211c80319c")).toBe(true);
});

it("an outbox CloudEvent carries the traceparent of the activity that wrote it (distributed-tracing extension)", async () => {
  await edda.start(traceEmit, { orderId: "o-tr" }, { instanceId: "trace-emit" });
  const done = await settle("trace-emit");
  const eventId = done.output as string;
  const deadline = Date.now() + 10_000;
  while (broker.deliveries(eventId).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const [delivery] = broker.deliveries(eventId);
  expect(delivery?.status).toBe(200);
  const activitySpan = ofInstance("trace-emit").find((s) => s.name === "edda.activity trace_announce")!;
  const { traceId, spanId } = activitySpan.spanContext();
  expect(delivery!.body).toMatchObject({ type: "ok.order.shipped", data: { orderId: "o-tr" }, traceparent: `00-${traceId}-${spanId}-01` });
  // The run's other spans share that trace: the consumer's work joins the run's trace.
  expect(ofInstance("trace-emit").every((s) => s.spanContext().traceId === traceId)).toBe(true);
});
