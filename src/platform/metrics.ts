/**
 * Metrics for a Node server's `GET /metrics`: a MeterProvider of the
 * OpenTelemetry SDK whose reader is the Prometheus exporter (its own HTTP
 * server never started; the app serves the text behind its API token). Both
 * packages are optional peers, loaded only when metrics are turned on
 * (EDDA_METRICS=prometheus), so an app without them installs and bundles
 * nothing more. The provider is the app's own, not the global one: a server
 * that also exports elsewhere registers its global provider as it likes.
 */
import { ConfigurationError } from "../core/errors.ts";
import type { MetricsApi } from "../engine/metrics.ts";

export interface PrometheusMetrics {
  /** What the engine records to (EddaOptions.metrics). */
  api: MetricsApi;
  /** The current exposition (EddaOptions.metricsText). */
  text(): Promise<string>;
  shutdown(): Promise<void>;
}

export async function prometheusMetrics(): Promise<PrometheusMetrics> {
  const [sdk, exporter] = await Promise.all([import("@opentelemetry/sdk-metrics"), import("@opentelemetry/exporter-prometheus")]).catch((err: unknown) => {
    const e = new ConfigurationError("EDDA_METRICS=prometheus needs the OpenTelemetry SDK: npm install @opentelemetry/api @opentelemetry/sdk-metrics @opentelemetry/exporter-prometheus", "EDDA_METRICS");
    throw Object.assign(e, { cause: err });
  });
  const reader = new exporter.PrometheusExporter({ preventServerStart: true });
  const provider = new sdk.MeterProvider({ readers: [reader] });
  const serializer = new exporter.PrometheusSerializer();
  return {
    api: { metrics: provider },
    async text() {
      const { resourceMetrics, errors } = await reader.collect();
      for (const e of errors) console.error("edda: collecting metrics:", e);
      return serializer.serialize(resourceMetrics);
    },
    shutdown: () => provider.shutdown(),
  };
}
