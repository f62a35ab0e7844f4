// support_agent with no model configured says so and does not start: with
// EDDA_AI_BASE_URL / EDDA_AI_MODEL unset, POST /workflows/support_agent/instances
// is a 422 ValidationError naming the variables, answered before the
// database (the app runs over noDatabase(): nothing created is nothing
// asked of it). And the settings' parse: both a URL and a model, or none.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NO_MODEL_CONFIGURED, supportAgent } from "../../functions/workflows/support-agent.ts";
import { aiModelSettings } from "../../src/platform/ai-env.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const VARS = ["EDDA_AI_BASE_URL", "EDDA_AI_MODEL", "EDDA_AI_API_KEY"] as const;
const saved = Object.fromEntries(VARS.map((v) => [v, process.env[v]]));
beforeAll(() => VARS.forEach((v) => delete process.env[v]));
afterAll(() => VARS.forEach((v) => (saved[v] === undefined ? delete process.env[v] : (process.env[v] = saved[v]))));

const t = appWithoutDatabase({ workflows: [supportAgent] });
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

describe("support_agent without a model", () => {
  it("a start is refused 422, naming EDDA_AI_BASE_URL and EDDA_AI_MODEL, and nothing is created", async () => {
    const r = await t.request("/workflows/support_agent/instances", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: { question: "Where is o-42?" } }) });
    expect(r.status).toBe(422);
    const body = (await r.json()) as { error_type: string; issues: { message: string }[] };
    expect(body.error_type).toBe("ValidationError");
    expect(body.issues.map((i) => i.message)).toEqual([NO_MODEL_CONFIGURED]);
    expect(NO_MODEL_CONFIGURED).toMatch(/EDDA_AI_BASE_URL.*EDDA_AI_MODEL/);
  });
});

describe("aiModelSettings", () => {
  it("needs a URL and a model; the key is optional; blank counts as unset", () => {
    expect(aiModelSettings({})).toBeUndefined();
    expect(aiModelSettings({ EDDA_AI_BASE_URL: "http://127.0.0.1:1/v1" })).toBeUndefined();
    expect(aiModelSettings({ EDDA_AI_BASE_URL: " ", EDDA_AI_MODEL: "m" })).toBeUndefined();
    expect(aiModelSettings({ EDDA_AI_BASE_URL: "http://127.0.0.1:1/v1", EDDA_AI_MODEL: "m" })).toEqual({ baseUrl: "http://127.0.0.1:1/v1", model: "m", apiKey: undefined });
    expect(aiModelSettings({ EDDA_AI_BASE_URL: "https://api.example/v1", EDDA_AI_MODEL: "m", EDDA_AI_API_KEY: "k" })).toEqual({ baseUrl: "https://api.example/v1", model: "m", apiKey: "k" });
  });
});
