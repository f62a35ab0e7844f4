// Issue 36, item 3: `why` and the viewer warn when an instance's history nears the size a cold step
// replays within the platform's CPU budget per invocation (cpuBudgetMs: the Workers adapter's Free-plan
// 10 ms, EDDA_CPU_BUDGET_MS), at the cost the replay scenario measured (engine/replay-cost.gen.ts). On
// real Postgres: a history past the budget, one near it, one far below, a finished one, and an app that
// knows no budget (Node's default). The budget is set from the measured cost so that 40 entries fit.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, sleep, workflow, type WhyView } from "../../src/index.ts";
import { entriesWithin, historyBudget, NEAR_SHARE } from "../../src/engine/history-budget.ts";
import { REPLAY_COST } from "../../src/engine/replay-cost.gen.ts";
import { readConfig, withEnvironment } from "../../src/platform/env.ts";
import { whyLines } from "../../src/platform/cli/remote.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const step = activity("whyhb_step", async (_ctx, i: number) => ({ i }));
const wide = workflow("whyhb_wide", async (ctx, { n, then }: { n: number; then: "sleep" | "end" }) => {
  await Promise.all(Array.from({ length: n }, (_, i) => step(ctx, i)));
  if (then === "sleep") await sleep(ctx, 3600);
  return n;
});
const budgetMs = REPLAY_COST.stepCpuMs + (40 * REPLAY_COST.cpuUsPerEntry) / 1000;
const fits = entriesWithin(budgetMs);
let budgeted: TestApp;
let unbudgeted: TestApp;

async function whyOf(app: TestApp, id: string): Promise<WhyView> {
  const res = await app.edda.fetch(new Request(`http://localhost/instances/${id}/why`));
  expect(res.status).toBe(200);
  return (await res.json()) as WhyView;
}

beforeAll(async () => {
  const pg = await freshPostgres("why_history_budget");
  budgeted = makeTestApp(pg.open(), { workflows: [wide], cpuBudgetMs: budgetMs });
  unbudgeted = makeTestApp(pg.open(), { workflows: [wide] });
  for (const [id, n, then] of [["hb-past", 50, "sleep"], ["hb-near", 36, "sleep"], ["hb-small", 10, "sleep"], ["hb-done", 50, "end"]] as const) {
    await budgeted.edda.start(wide, { n, then }, { instanceId: id });
    await budgeted.waitFor(id, then === "sleep" ? ["waiting_for_timer"] : ["completed"]);
  }
}, 60_000);
afterAll(async () => {
  for (const x of [budgeted, unbudgeted]) await x.edda.close();
  for (const x of [budgeted, unbudgeted]) await x.database.close();
});

describe("a history near the CPU budget", () => {
  it("historyBudget: none without a budget or below 80 % of what fits; near, then past", () => {
    expect(fits).toBeGreaterThanOrEqual(39);
    expect(fits).toBeLessThanOrEqual(40);
    expect(historyBudget(10_000, null)).toBeNull();
    expect(historyBudget(Math.ceil(fits * NEAR_SHARE) - 1, budgetMs)).toBeNull();
    const near = historyBudget(Math.ceil(fits * NEAR_SHARE), budgetMs)!;
    expect(near).toMatchObject({ fitsEntries: fits, cpuBudgetMs: budgetMs });
    expect(near.detail).toMatch(/near the \d+ a cold step replays within/);
    expect(historyBudget(fits + 1, budgetMs)!.detail).toMatch(/past the/);
    // The Workers Free plan's 10 ms at the measured cost: the figure README's "When to recur" rounds down.
    expect(entriesWithin(10)).toBe(Math.floor(((10 - REPLAY_COST.stepCpuMs) * 1000) / REPLAY_COST.cpuUsPerEntry));
  });

  it("EDDA_CPU_BUDGET_MS sets the budget, an explicit option wins", () => {
    expect(readConfig({ EDDA_CPU_BUDGET_MS: "30000" }).cpuBudgetMs).toBe(30_000);
    expect(withEnvironment({}, readConfig({ EDDA_CPU_BUDGET_MS: "30000" }), { cpuBudgetMs: 10 }).cpuBudgetMs).toBe(30_000);
    expect(withEnvironment({ cpuBudgetMs: 50 }, readConfig({ EDDA_CPU_BUDGET_MS: "30000" })).cpuBudgetMs).toBe(50);
    expect(withEnvironment({}, readConfig({}), { cpuBudgetMs: 10 }).cpuBudgetMs).toBe(10);
    expect(() => readConfig({ EDDA_CPU_BUDGET_MS: "ten" })).toThrow(/EDDA_CPU_BUDGET_MS/);
  });

  it("why warns past and near the budget, not far below it, not once finished, not without a budget", async () => {
    const past = await whyOf(budgeted, "hb-past");
    expect(past.reason.kind).toBe("timer");
    expect(past.reason.historyBudget).toMatchObject({ entries: 50, fitsEntries: fits, cpuBudgetMs: budgetMs });
    expect(past.reason.historyBudget!.detail).toMatch(/^its history holds 50 entries, past the/);
    expect(past.reason.historyBudget!.detail).toMatch(/ctx\.recur/);
    expect(whyLines(past as unknown as Record<string, unknown>)).toMatch(/\n {2}history size: its history holds 50 entries/);
    expect((await whyOf(budgeted, "hb-near")).reason.historyBudget).toMatchObject({ entries: 36, fitsEntries: fits });
    expect((await whyOf(budgeted, "hb-small")).reason.historyBudget).toBeUndefined();
    expect((await whyOf(budgeted, "hb-done")).reason).toMatchObject({ kind: "none" });
    expect((await whyOf(budgeted, "hb-done")).reason.historyBudget).toBeUndefined();
    expect((await whyOf(unbudgeted, "hb-past")).reason.historyBudget).toBeUndefined();
    // The instance view carries it in its reason too.
    expect((await budgeted.edda.getInstance("hb-past"))!.why).toMatchObject({ historyBudget: { entries: 50 } });
  });

  it("the viewer's instance page shows the warning; a small history's page does not", async () => {
    const page = async (id: string) => {
      const res = await budgeted.edda.fetch(new Request(`http://localhost/ui/instances/${id}`));
      expect(res.status).toBe(200);
      return res.text();
    };
    const past = await page("hb-past");
    expect(past).toMatch(/id="why-history-budget" data-history-entries="50"/);
    expect(past).toMatch(/history size:<\/strong> its history holds 50 entries/);
    expect(await page("hb-small")).not.toMatch(/id="why-history-budget"/);
  });
});
