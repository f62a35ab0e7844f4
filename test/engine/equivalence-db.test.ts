// The database-backed variant of the equivalence properties: generated
// workflow programs run through the real engine on postgres.js (real steps,
// leases, retries, timers, warm hand-offs) and must end exactly as the pure
// model of the same program (test/core/stepper.ts) says. Programs invoke
// real child workflows too (ending at once, or failing): the child runs as
// its own instance and its end wakes the parent.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workflow, type Workflow } from "../../src/index.ts";
import { childWorkflow, forDatabase, programArb, programFn, setHookPoster } from "../core/programs.ts";
import { simulate } from "../core/stepper.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

const CASES = Number(process.env.EDDA_DB_PROPERTY_RUNS ?? 200);
const programs = fc.sample(programArb, { numRuns: CASES, seed: 20261130 }).map((p, i) => ({ i, body: forDatabase(p.body) })).filter((p) => p.body.length > 0);
const workflows: Workflow[] = programs.map((p) => workflow(`prop_db_${p.i}`, programFn({ body: p.body, messages: [] })));

/** Programs that invoke a child (parallel ones among them): the warm/cold question includes a child's end waking its parent. */
const invoking = programs.filter((p) => JSON.stringify(p.body).includes('"t":"invoke"')).length;
/** Programs with a per-wait webhook: delivered by the workflow's own POST, expired, or raced against a timer. */
const hooking = programs.filter((p) => JSON.stringify(p.body).includes('"t":"hook"')).length;

const shape = (h: { activityId: string; eventType: string }[]) => h.map((e) => `${e.activityId} ${e.eventType}`);

describe("real engine ≡ pure model on postgres.js (generated programs)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = makeTestApp(await openTestDatabase("postgres-js", "equivalence_db"), { workflows: [...workflows, childWorkflow] });
    setHookPoster(async (path, body) => (await t.edda.app.request(`http://localhost${path}`, { method: "POST", headers: { "content-type": "application/json" }, body })).status);
  });
  afterAll(async () => {
    await t.edda.close();
  });

  it(`${programs.length} generated programs end with the model's outcome and history`, async () => {
    const started = await Promise.all(programs.map((p, k) => t.edda.start(workflows[k]!, null).then((s) => ({ ...p, instanceId: s.instanceId }))));
    let compared = 0;
    const reached = { delivered: 0, expired: 0, racedWon: 0, racedLost: 0 };
    for (const [k, p] of started.entries()) {
      const model = await simulate(workflows[k]!.fn as never, [], "warm");
      const done = await t.waitFor(p.instanceId, ["completed", "failed"], 60_000);
      const history = (done.history as { activityId: string; eventType: string }[]).filter((h) => !h.activityId.startsWith("compensate:"));
      const label = JSON.stringify(p.body);
      // A child's id starts with its parent's; the model's instance is "sim".
      const asModel = (v: unknown): unknown => JSON.parse(JSON.stringify(v).replaceAll(`${p.instanceId}:child_`, "sim:child_"));
      expect(done.status, label).toBe(model.status);
      if (model.status === "completed") expect(asModel(done.output), label).toEqual(model.output);
      else expect(asModel((done.error as { error_message: string }).error_message), label).toBe(model.output);
      expect(shape(history), label).toEqual(shape(model.history.filter((h) => !h.activityId.startsWith("compensate:"))));
      compared++;
      const kinds = shape(history);
      if (kinds.some((k) => k.endsWith(" WebhookReceived"))) reached.delivered++;
      if (kinds.some((k) => k.endsWith(" WebhookExpired"))) reached.expired++;
      if (kinds.some((k) => k.startsWith("race:") && k.endsWith(" WebhookReceived"))) reached.racedWon++;
      if (kinds.some((k) => k.startsWith("race:") && k.endsWith(" TimerExpired"))) reached.racedLost++;
    }
    expect(invoking).toBeGreaterThan(programs.length / 10);
    expect(reached.delivered * reached.expired * reached.racedWon * reached.racedLost).toBeGreaterThan(0);
    console.log(`equivalence on postgres.js: ${compared} programs compared with the pure model (${invoking} invoke a child, ${hooking} open a webhook: ${JSON.stringify(reached)})`);
  }, 240_000);
});
