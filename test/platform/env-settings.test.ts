// The environment's settings as readConfig reads them (platform/env.ts, the
// one place the adapters read the environment): every numeric knob is a
// number ≥ 0 or unset, and anything else is a ConfigurationError naming the
// variable; flags are 1/0/true/false; blank values count as unset;
// EDDA_RETENTION_DAYS sets all three retentions. (The retention case moved
// from test/safety/retention.test.ts, which keeps the sweep's purges on
// Postgres.) How the options reach the app: options.test.ts.
import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../../src/core/errors.ts";
import { readConfig } from "../../src/platform/env.ts";

const NUMBERS = {
  EDDA_MAX_STREAMS: "maxOpenStreams",
  EDDA_BODY_TIMEOUT_SECONDS: "bodyTimeoutSeconds",
  EDDA_MAX_BODY_BYTES: "maxBodyBytes",
  EDDA_SWEEP_INTERVAL_MS: "sweepIntervalMs",
  EDDA_SWEEP_CPU_MS: "sweepCpuMs",
  EDDA_CONSUMER_CPU_MS: "consumerCpuMs",
  EDDA_MAX_WAKE_SECONDS: "maxWakeSeconds",
  EDDA_SUBREQUEST_LIMIT: "subrequestLimit",
  EDDA_MAX_HOPS: "maxHops",
  EDDA_STEP_CONCURRENCY: "stepConcurrency",
  EDDA_LEASE_SECONDS: "leaseSeconds",
  EDDA_HANDOFF_LEASE_SECONDS: "handoffLeaseSeconds",
} as const;

const variableOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigurationError);
    return (e as ConfigurationError).variable;
  }
  return "accepted";
};

describe("environment settings", () => {
  it("every numeric knob: a number ≥ 0 (trimmed), unset when blank, else a ConfigurationError naming it", () => {
    for (const [name, key] of Object.entries(NUMBERS)) {
      expect(readConfig({ [name]: " 12.5 " })[key], name).toBe(12.5);
      expect(readConfig({ [name]: "0" })[key], name).toBe(0);
      expect(readConfig({ [name]: "  " })[key], name).toBeUndefined();
      expect(readConfig({})[key], name).toBeUndefined();
      for (const bad of ["-1", "ten", "Infinity", "1e400"]) expect(variableOf(() => readConfig({ [name]: bad })), `${name}=${bad}`).toBe(name);
    }
  });

  it("flags are 1/0/true/false in any case; anything else names the variable", () => {
    for (const [v, on] of [["1", true], ["TRUE", true], ["0", false], ["false", false], ["", false]] as const) expect(readConfig({ EDDA_EVENTS_TOKEN_TARGETING: v }).eventsTokenTargeting, v).toBe(on);
    expect(variableOf(() => readConfig({ EDDA_EVENTS_TOKEN_TARGETING: "yes" }))).toBe("EDDA_EVENTS_TOKEN_TARGETING");
  });

  it("strings are trimmed, blank ones unset; the service name defaults; EDDA_DISPATCHER=http picks the fetch dispatcher", () => {
    const c = readConfig({ DATABASE_URL: " postgres://x ", EDDA_BROKER_URL: "  ", EDDA_DISPATCHER: "http" });
    expect({ url: c.databaseUrl, broker: c.brokerUrl, service: c.serviceName, fetch: c.fetchDispatcher }).toEqual({ url: "postgres://x", broker: undefined, service: "edda-edge", fetch: true });
    expect(readConfig({ EDDA_SERVICE_NAME: "billing", EDDA_DISPATCHER: "local" })).toMatchObject({ serviceName: "billing", fetchDispatcher: false });
  });

  it("EDDA_RETENTION_DAYS sets every retention; a bad value is a configuration error", () => {
    expect(readConfig({ EDDA_RETENTION_DAYS: "3" }).retention).toEqual({ finishedInstancesSeconds: 259_200, channelMessagesSeconds: 259_200, cloudEventDedupeSeconds: 259_200 });
    expect(readConfig({}).retention).toBeUndefined();
    expect(() => readConfig({ EDDA_RETENTION_DAYS: "soon" })).toThrow(ConfigurationError);
  });
});
