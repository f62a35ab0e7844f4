// One precedence for options on every platform (src/platform/env.ts
// withEnvironment): the caller's explicit option wins, else the environment
// variable, else the platform's default. No database: the adapters are built
// against an address nothing listens on, and nothing here sends a statement.
import fc from "fast-check";
import { afterEach, describe, expect, test } from "vitest";
import { engineOf } from "../../src/edda.ts";
import { createDenoApp } from "../../src/platform/deno.ts";
import { readConfig, withEnvironment, type EnvOptions } from "../../src/platform/env.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";

/** Nothing listens here; postgres.js and Neon's driver connect on the first statement only. */
const NOWHERE = "postgres://edda:edda@127.0.0.1:9/none";

const ENV_NAMES = {
  serviceName: "EDDA_SERVICE_NAME",
  secret: "EDDA_SECRET",
  apiToken: "EDDA_API_TOKEN",
  eventsToken: "EDDA_EVENTS_TOKEN",
  brokerUrl: "EDDA_BROKER_URL",
  leaseSeconds: "EDDA_LEASE_SECONDS",
  handoffLeaseSeconds: "EDDA_HANDOFF_LEASE_SECONDS",
  subrequestLimit: "EDDA_SUBREQUEST_LIMIT",
  maxBodyBytes: "EDDA_MAX_BODY_BYTES",
} as const satisfies Partial<Record<keyof EnvOptions, string>>;
type Named = keyof typeof ENV_NAMES;
const NUMERIC = new Set<Named>(["leaseSeconds", "handoffLeaseSeconds", "subrequestLimit", "maxBodyBytes"]);

const valueFor = (key: Named, n: number) => (NUMERIC.has(key) ? n : key === "brokerUrl" ? `https://broker.example/${n}` : `${key}-${n}`);

describe("withEnvironment", () => {
  test("for every option: explicit wins, else the environment, else the default; an undefined option counts as not given", () => {
    const source = fc.constantFrom<"explicit" | "undefined" | "absent">("explicit", "undefined", "absent");
    const keys = Object.keys(ENV_NAMES) as Named[];
    fc.assert(
      fc.property(
        fc.record(Object.fromEntries(keys.map((k) => [k, fc.record({ given: source, env: fc.boolean(), fallback: fc.boolean(), n: fc.integer({ min: 1, max: 10_000 }) })])) as Record<Named, fc.Arbitrary<{ given: "explicit" | "undefined" | "absent"; env: boolean; fallback: boolean; n: number }>>),
        (plan) => {
          const explicit: Record<string, unknown> = { workflows: [] };
          const env: Record<string, string> = {};
          const defaults: Record<string, unknown> = {};
          for (const key of keys) {
            const p = plan[key];
            if (p.given === "explicit") explicit[key] = valueFor(key, p.n);
            if (p.given === "undefined") explicit[key] = undefined;
            if (p.env) env[ENV_NAMES[key]] = String(valueFor(key, p.n + 1));
            if (p.fallback) defaults[key] = valueFor(key, p.n + 2);
          }
          const out = withEnvironment(explicit, readConfig(env), defaults as Partial<EnvOptions>) as Record<string, unknown>;
          for (const key of keys) {
            const p = plan[key];
            const expected =
              p.given === "explicit" ? valueFor(key, p.n)
              : p.env ? valueFor(key, p.n + 1)
              : key === "serviceName" ? "edda-edge" // readConfig's own default for an unset EDDA_SERVICE_NAME
              : p.fallback ? valueFor(key, p.n + 2)
              : undefined;
            expect(out[key]).toEqual(expected);
            if (expected === undefined) expect(Object.hasOwn(out, key)).toBe(false);
          }
          expect(out.workflows).toBe(explicit.workflows);
        },
      ),
      { numRuns: 300 },
    );
  });

  test("retention and the events-token targeting flag follow the same precedence", () => {
    const config = readConfig({ EDDA_RETENTION_DAYS: "2", EDDA_EVENTS_TOKEN_TARGETING: "1" });
    const fromEnv = withEnvironment({}, config);
    expect(fromEnv.retention).toEqual({ finishedInstancesSeconds: 172_800, channelMessagesSeconds: 172_800, cloudEventDedupeSeconds: 172_800 });
    expect(fromEnv.eventsTokenTargeting).toBe(true);
    const retention = { finishedInstancesSeconds: 60, channelMessagesSeconds: 60, cloudEventDedupeSeconds: 60 };
    const explicit = withEnvironment({ retention, eventsTokenTargeting: false }, config);
    expect(explicit.retention).toBe(retention);
    expect(explicit.eventsTokenTargeting).toBe(false);
  });
});

describe("the adapters use it", () => {
  let node: NodeServer | undefined;
  afterEach(async () => {
    await node?.close();
    node = undefined;
  });

  const env = { DATABASE_URL: NOWHERE, EDDA_SECRET: "s3cret", EDDA_API_TOKEN: "t0ken", EDDA_SERVICE_NAME: "from-env", EDDA_LEASE_SECONDS: "3", EDDA_HANDOFF_LEASE_SECONDS: "4" };

  test("Node: explicit options win over the environment, which fills the rest", async () => {
    node = await serveNode({ workflows: [], env, port: 0, sweepIntervalMs: 0, leaseSeconds: 9, serviceName: "explicit" });
    const engine = await engineOf(node.edda);
    expect([engine.serviceName, engine.defaultLeaseSeconds, engine.handoffLeaseSeconds]).toEqual(["explicit", 9, 4]);
    // The API token came from the environment: the API asks for it.
    expect((await node.edda.fetch(new Request("http://edda.test/instances"))).status).toBe(401);
  });

  test("Deno: the same precedence (it used to let the environment win)", async () => {
    const app = createDenoApp({ workflows: [], env, leaseSeconds: 9, serviceName: "explicit" });
    try {
      const engine = await engineOf(app.edda);
      expect([engine.serviceName, engine.defaultLeaseSeconds, engine.handoffLeaseSeconds]).toEqual(["explicit", 9, 4]);
      expect((await app.edda.fetch(new Request("http://edda.test/instances"))).status).toBe(401);
    } finally {
      await app.edda.close();
      await app.database.close();
    }
  });
});
