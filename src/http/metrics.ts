/**
 * `GET /metrics`: the engine's OpenTelemetry metrics in the Prometheus text
 * exposition format, behind the API token like the rest of the API. The app
 * only serves what its `metricsText` option produces (the Node adapter builds
 * it from the OpenTelemetry SDK and its Prometheus serializer, loaded on
 * demand: platform/metrics.ts), so the core bundles no SDK. Before each
 * scrape the gauges that only the database knows are sampled (one read-only
 * statement), so they are as fresh as the scrape.
 */
import type { Hono } from "hono";
import * as z from "zod";
import { documented } from "./openapi.ts";
import { problem } from "./problem.ts";
import type { RouteHelpers } from "./routes.ts";

/** The Prometheus text format's media type (exposition format 0.0.4). */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

export function metricsRoutes(api: Hono, h: RouteHelpers, metricsText: (() => Promise<string>) | undefined): void {
  api.get(
    "/metrics",
    documented({
      operationId: "metrics",
      summary: "Metrics in the Prometheus text format (Node with metrics on: EDDA_METRICS=prometheus)",
      description: "Steps by workflow and outcome (count, latency histogram), starts, failures, quarantines, lease takeovers, sweep task durations, and gauges sampled from the database at each scrape: queue depth per key, timers due and their lag, outbox lag and dead letters.",
      tags: ["operations"],
      auth: "api",
      responses: {
        200: { description: "the exposition", schema: z.string(), contentType: PROMETHEUS_CONTENT_TYPE },
        404: { description: "metrics are not served by this app (not Node, or not enabled)" },
      },
    }),
    async (c) => {
      if (!metricsText) return problem(c, 404, "metrics are not enabled here: on Node set EDDA_METRICS=prometheus (or serveNode({ prometheus: true }))", "NotFound");
      const e = await h.engine(c);
      await e.sampleMetrics().catch((err: unknown) => console.error("edda: sampling the metrics gauges failed", err));
      return c.body(await metricsText(), 200, { "content-type": PROMETHEUS_CONTENT_TYPE, "cache-control": "no-store" });
    },
  );
}
