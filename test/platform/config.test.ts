// Secure by default, before anything is served: a token variable or option that
// is set but blank is a ConfigurationError (it would otherwise mean "no auth"),
// and an API without a token is refused unless explicitly allowed. No
// database: the app is built on a factory that is never called.
import { describe, expect, it } from "vitest";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { ConfigurationError } from "../../src/core/errors.ts";
import { createEdda, type EddaOptions } from "../../src/edda.ts";
import { readConfig, unauthenticatedRefusal } from "../../src/platform/env.ts";

const withoutDatabase = (opts: Omit<EddaOptions, "database">) =>
  createEdda({
    ...opts,
    database: () => {
      throw new Error("configuration is checked before any database is opened");
    },
  });

describe("secure defaults", () => {
  it("empty tokens are configuration errors, from the environment and in code", () => {
    expect(() => readConfig({ EDDA_API_TOKEN: "" })).toThrow(ConfigurationError);
    expect(() => readConfig({ EDDA_EVENTS_TOKEN: "   " })).toThrow(/EDDA_EVENTS_TOKEN is set but empty/);
    expect(() => readConfig({ EDDA_ALLOW_UNAUTHENTICATED: "maybe" })).toThrow(ConfigurationError);
    expect(() => readConfig({ EDDA_METRICS: "statsd" })).toThrow(/EDDA_METRICS must be "prometheus" or "off"/);
    expect(readConfig({ EDDA_METRICS: "prometheus" }).metrics).toBe("prometheus");
    expect(readConfig({ EDDA_METRICS: "off" }).metrics).toBe("off");
    expect(readConfig({ EDDA_API_TOKEN: " t " }).apiToken).toBe("t");
    expect(unauthenticatedRefusal(readConfig({}))?.variable).toBe("EDDA_API_TOKEN");
    expect(unauthenticatedRefusal(readConfig({ EDDA_ALLOW_UNAUTHENTICATED: "1" }))).toBeNull();
    expect(unauthenticatedRefusal(readConfig({ EDDA_API_TOKEN: "t" }))).toBeNull();
    expect(() => withoutDatabase({ workflows: [pipeline], apiToken: "" })).toThrow(ConfigurationError);
    expect(() => withoutDatabase({ workflows: [pipeline], eventsToken: ["ok", " "] })).toThrow(ConfigurationError);
    // A valid configuration builds.
    expect(withoutDatabase({ workflows: [pipeline], apiToken: "t", eventsToken: ["ok"] }).app).toBeDefined();
  });
});
