// Metrics with the real OpenTelemetry SDK (MeterProvider, an in-memory
// exporter read on demand) on real Postgres: steps by workflow and outcome
// (count and latency), starts, failures, quarantines (a database trigger
// refuses one instance's history rows), lease takeovers, sweep task
// durations, and the gauges sampled from the database (queue depth per key,
// timers due and their lag, outbox lag and dead letters). Then GET /metrics
// on a Node server (EDDA_METRICS=prometheus) behind its API token, read with
// a Prometheus text-format parser.
import * as otel from "@opentelemetry/api";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type MetricData } from "@opentelemetry/sdk-metrics";
import { sql } from "drizzle-orm";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { engineOf } from "../../src/edda.ts";
import { activity, sendEventTransactional, sleep, TerminalError, waitMessage, workflow } from "../../src/index.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const add = activity("m_add", async (_ctx, n: number) => n + 1);
const boom = activity("m_boom", async () => {
  throw new TerminalError("no such thing");
});
const ok = workflow("m_ok", async (ctx, n: number) => add(ctx, await add(ctx, n)));
const failing = workflow("m_failing", async (ctx) => boom(ctx));
const refused = workflow("m_refused", async (ctx) => add(ctx, 1));
const napper = workflow("m_napper", async (ctx) => {
  await sleep(ctx, 3600);
  return "woke";
});
const gate = workflow("m_gate", { input: z.object({ account: z.string() }), concurrency: { key: (i: { account: string }) => i.account, limit: 1 } }, async (ctx) => waitMessage(ctx, "m-open", { timeoutSeconds: 3600 }));
const announce = activity("m_announce", (ctx, n: number) => sendEventTransactional(ctx, { type: "m.announced", source: "/metrics-test", data: { n } }));
const emitter = workflow("m_emitter", async (ctx, n: number) => announce(ctx, n));
const workflows = [ok, failing, refused, napper, gate, emitter];

const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
const provider = new MeterProvider({ readers: [reader] });
let t: TestApp;

/** The metrics as the SDK exports them now. */
async function collect(): Promise<MetricData[]> {
  exporter.reset();
  await reader.forceFlush();
  return exporter.getMetrics().flatMap((rm) => rm.scopeMetrics.flatMap((s) => s.metrics));
}
const points = (ms: MetricData[], name: string) => (ms.find((m) => m.descriptor.name === name)?.dataPoints ?? []) as { attributes: Record<string, unknown>; value: unknown }[];
const valueOf = (ms: MetricData[], name: string, attrs: Record<string, string> = {}) =>
  points(ms, name).find((p) => Object.entries(attrs).every(([k, v]) => p.attributes[k] === v))?.value;
const sweep = () => t.edda.sweep({ resumeIdleSeconds: 0 });

beforeAll(async () => {
  otel.metrics.setGlobalMeterProvider(provider);
  const pg = await freshPostgres("metrics");
  t = makeTestApp(pg.open(), { workflows, metrics: otel, quarantineAfterFailures: 2 });
  await t.database.db.execute(sql`CREATE TABLE m_poison (instance_id text PRIMARY KEY)`);
  await t.database.db.execute(sql`
    CREATE FUNCTION m_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM m_poison p WHERE p.instance_id = NEW.instance_id) AND NEW.event_type = 'ActivityCompleted' THEN
        RAISE EXCEPTION 'refused for %', NEW.instance_id;
      END IF;
      RETURN NEW;
    END $$`);
  await t.database.db.execute(sql`CREATE TRIGGER m_refuse_history BEFORE INSERT ON workflow_history FOR EACH ROW EXECUTE FUNCTION m_refuse()`);
}, 120_000);
afterAll(async () => {
  await t?.edda.close();
  await t?.database.close();
  otel.metrics.disable();
});

describe("with the OpenTelemetry SDK", () => {
  it("counts and times steps by workflow and outcome, and counts starts and failures", async () => {
    const runs = await Promise.all([1, 2, 3].map((n) => t.edda.start("m_ok", n)));
    for (const r of runs) expect((await t.waitFor(r.instanceId)).status).toBe("completed");
    const f = await t.edda.start("m_failing", null);
    expect((await t.waitFor(f.instanceId)).status).toBe("failed");
    await t.dispatcher.idle();

    const ms = await collect();
    expect(valueOf(ms, "edda.instances.started", { workflow: "m_ok" })).toBe(3);
    expect(valueOf(ms, "edda.instances.started", { workflow: "m_failing" })).toBe(1);
    expect(valueOf(ms, "edda.instances.failed", { workflow: "m_failing" })).toBe(1);
    expect(valueOf(ms, "edda.instances.failed", { workflow: "m_ok" })).toBeUndefined();
    // Each m_ok run: two activity steps, the second one completing it.
    expect(valueOf(ms, "edda.steps", { workflow: "m_ok", outcome: "completed" })).toBe(3);
    const histogram = valueOf(ms, "edda.step.duration", { workflow: "m_ok", outcome: "completed" }) as { count: number; sum: number; buckets: { counts: number[] } };
    expect(histogram.count).toBe(3);
    expect(histogram.sum).toBeGreaterThan(0);
    expect(histogram.buckets.counts.reduce((a, b) => a + b, 0)).toBe(3);
    expect(valueOf(ms, "edda.steps", { workflow: "m_failing", outcome: "failed" })).toBe(1);
    const total = points(ms, "edda.steps").filter((p) => p.attributes.workflow === "m_ok").reduce((a, p) => a + (p.value as number), 0);
    expect(total).toBeGreaterThanOrEqual(6);
  });

  it("counts an instance quarantined after failing steps, and its failed steps as errors", async () => {
    await t.database.db.execute(sql`INSERT INTO m_poison VALUES ('m-bad')`);
    await t.edda.start("m_refused", null, { instanceId: "m-bad" });
    for (let i = 0; i < 20 && (await t.edda.getInstance("m-bad"))?.status !== "quarantined"; i++) {
      await t.dispatcher.idle();
      await sweep();
    }
    expect((await t.edda.getInstance("m-bad"))?.status).toBe("quarantined");
    const ms = await collect();
    expect(valueOf(ms, "edda.instances.quarantined", { task: "step" })).toBe(1);
    expect(valueOf(ms, "edda.steps", { workflow: "m_refused", outcome: "error" })).toBe(2);
    // A valid run still goes through.
    const after = await t.edda.start("m_ok", 10);
    expect((await t.waitFor(after.instanceId)).output).toBe(12);
  });

  it("counts lease takeovers and times each sweep task", async () => {
    const nap = await t.edda.start("m_napper", null, { instanceId: "m-nap-dead" });
    await t.waitFor(nap.instanceId, ["waiting_for_timer"]);
    await t.dispatcher.idle();
    const before = (valueOf(await collect(), "edda.leases.taken_over") as number | undefined) ?? 0;
    // A worker that died mid-step: its lease on a running instance has expired.
    await t.database.db.execute(
      sql`UPDATE workflow_instances SET status = 'running', locked_by = 'dead-worker', lock_token = lock_token + 1, lock_expires_at = now() - interval '1 second' WHERE instance_id = 'm-nap-dead'`,
    );
    const report = await sweep();
    expect(report.staleLeasesReleased).toBe(1);
    const ms = await collect();
    expect(valueOf(ms, "edda.leases.taken_over")).toBe(before + 1);
    const tasks = new Set(points(ms, "edda.sweep.task.duration").map((p) => p.attributes.task));
    for (const task of ["timers", "stale_leases", "outbox", "resumable", "instance_retention"]) expect(tasks).toContain(task);
    const timed = valueOf(ms, "edda.sweep.task.duration", { task: "stale_leases", result: "ok" }) as { count: number; buckets: { boundaries: number[] } };
    expect(timed.count).toBeGreaterThanOrEqual(1);
    // Buckets in the histogram's unit, seconds (regression: the SDK's default buckets, 0, 5, 10, 25 …, are
    // millisecond-scale, so a 15 ms task landed in le="5").
    expect(timed.buckets.boundaries.slice(0, 4)).toEqual([0.001, 0.0025, 0.005, 0.01]);
    expect(Math.max(...timed.buckets.boundaries)).toBeLessThanOrEqual(60);
    await t.waitFor("m-nap-dead", ["waiting_for_timer"]);
  });

  it("samples queue depth per key, due timers and their lag, outbox lag and dead letters from the database", async () => {
    const gates = [];
    for (const n of [1, 2, 3]) gates.push(await t.edda.start("m_gate", { account: "acme" }, { instanceId: `m-gate-${n}` }));
    await t.edda.start("m_gate", { account: "solo" }, { instanceId: "m-gate-solo" });
    const late = await t.edda.start("m_napper", null, { instanceId: "m-nap-late" });
    await t.waitFor(late.instanceId, ["waiting_for_timer"]);
    await t.database.db.execute(sql`UPDATE workflow_timer_subscriptions SET expires_at = now() - interval '90 seconds' WHERE instance_id = 'm-nap-late'`);
    // No broker: the outbox rows stay pending; one is made old, one a dead letter.
    for (const n of [1, 2]) expect((await t.waitFor((await t.edda.start("m_emitter", n, { instanceId: `m-emit-${n}` })).instanceId)).status).toBe("completed");
    await t.database.db.execute(sql`UPDATE outbox_events SET created_at = now() - interval '120 seconds' WHERE event_data LIKE '%"n":1%'`);
    await t.database.db.execute(sql`UPDATE outbox_events SET status = 'invalid' WHERE event_data LIKE '%"n":2%'`);
    await t.dispatcher.idle();

    await (await engineOf(t.edda)).sampleMetrics();
    const ms = await collect();
    expect(valueOf(ms, "edda.queue.depth", { key: "m_gate:acme" })).toBe(2);
    expect(valueOf(ms, "edda.queue.depth", { key: "m_gate:solo" })).toBeUndefined();
    expect(valueOf(ms, "edda.timers.due")).toBe(1);
    expect(valueOf(ms, "edda.timers.fire_lag")).toBeGreaterThanOrEqual(90);
    expect(valueOf(ms, "edda.outbox.pending")).toBe(1);
    expect(valueOf(ms, "edda.outbox.lag")).toBeGreaterThanOrEqual(120);
    expect(valueOf(ms, "edda.outbox.dead_letters", { status: "invalid" })).toBe(1);
    expect(valueOf(ms, "edda.outbox.dead_letters", { status: "expired" })).toBe(0);
    expect(valueOf(ms, "edda.instances.quarantined_now")).toBe(1);
    // Instances by status and by why they are not moving (GET /instances/:id/why), the oldest age per reason.
    expect(valueOf(ms, "edda.instances.unfinished", { status: "queued", reason: "concurrency" })).toBe(2);
    expect(valueOf(ms, "edda.instances.unfinished", { status: "waiting_for_message", reason: "message" })).toBe(2);
    expect(valueOf(ms, "edda.instances.unfinished", { status: "quarantined", reason: "quarantined" })).toBe(1);
    expect(valueOf(ms, "edda.instances.unfinished", { status: "waiting_for_timer", reason: "timer" })).toBeGreaterThanOrEqual(1);
    expect(valueOf(ms, "edda.instances.oldest_age", { reason: "concurrency" })).toBeGreaterThanOrEqual(0);
    expect(valueOf(ms, "edda.instances.unfinished", { status: "completed", reason: "none" })).toBeUndefined();

    // The sweep fires the late timer and samples again: nothing is due any more.
    await sweep();
    expect(valueOf(await collect(), "edda.timers.due")).toBe(0);
  });
});

describe("GET /metrics on Node", () => {
  let node: NodeServer;
  const TOKEN = "metrics-token";
  beforeAll(async () => {
    const pg = await freshPostgres("metrics_node");
    node = await serveNode({ workflows: [ok, gate], port: 0, sweepIntervalMs: 0, env: { DATABASE_URL: pg.url, EDDA_METRICS: "prometheus", EDDA_API_TOKEN: TOKEN, EDDA_SECRET: "s" } });
  }, 120_000);
  afterAll(async () => {
    await node?.close();
  });
  const get = (path: string, token?: string) => fetch(`http://127.0.0.1:${node.port}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});

  it("serves the Prometheus text behind the API token; a parser reads steps, latency and gauges from it", async () => {
    for (const n of [1, 2]) await node.edda.start("m_ok", n, { instanceId: `node-ok-${n}` });
    for (const n of [1, 2]) await node.edda.start("m_gate", { account: "beta" }, { instanceId: `node-gate-${n}` });
    for (const id of ["node-ok-1", "node-ok-2"]) {
      for (let i = 0; i < 200 && (await node.edda.getInstance(id))?.status !== "completed"; i++) await new Promise((r) => setTimeout(r, 20));
    }
    expect((await get("/metrics")).status).toBe(401);
    expect((await get("/metrics", "wrong")).status).toBe(401);

    const res = await get("/metrics", TOKEN);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const families = parsePrometheusTextFormat(text);
    const family = (name: string) => families.find((f) => f.name === name);
    const steps = family("edda_steps_total");
    expect(steps?.type).toBe("COUNTER");
    expect(steps?.metrics.find((m) => m.labels?.workflow === "m_ok" && m.labels.outcome === "completed")?.value).toBe("2");
    const latency = families.find((f) => f.name.startsWith("edda_step_duration"));
    expect(latency?.type).toBe("HISTOGRAM");
    expect(latency!.metrics[0]?.buckets?.["+Inf"]).toBeDefined();
    // The parser folds a histogram's label sets into one (its limitation), so the labelled count is read from the line itself.
    expect(text).toMatch(new RegExp(`^${latency!.name}_count\\{[^}]*workflow="m_ok"[^}]*\\} 2$`, "m"));
    expect(text).toMatch(new RegExp(`^${latency!.name}_bucket\\{[^}]*outcome="completed"[^}]*le="\\+Inf"[^}]*\\} 2$`, "m"));
    expect(family("edda_instances_started_total")?.metrics.find((m) => m.labels?.workflow === "m_ok")?.value).toBe("2");
    // Sampled at the scrape, not at the last sweep (there was none).
    expect(family("edda_queue_depth")?.metrics.find((m) => m.labels?.key === "m_gate:beta")?.value).toBe("1");
    expect(family("edda_instances_unfinished")?.metrics.find((m) => m.labels?.status === "queued" && m.labels.reason === "concurrency")?.value).toBe("1");
    expect(Number(family("edda_instances_oldest_age")?.metrics.find((m) => m.labels?.reason === "concurrency")?.value)).toBeGreaterThanOrEqual(0);
  });

  it("a bad request leaves the endpoint serving", async () => {
    expect((await get("/metrics?x=%ff", TOKEN)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${node.port}/metrics`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body: "{}" })).status).toBe(404);
    expect((await get("/metrics", TOKEN)).status).toBe(200);
  });
});
