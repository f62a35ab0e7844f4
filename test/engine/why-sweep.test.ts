// Issue 37, item 3: a sweep that has not run within its cadence shows up — in `why` (the reason's
// clause and `sweepOverdue`) and in /readyz's detail — on real Postgres: never swept, swept just now,
// and left alone for longer than five cadences. The cadence is the app's (sweepIntervalSeconds; the
// adapters set Node's sweep interval, a cron's minute); an app that does not know it never calls one overdue.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep, workflow, type WhyView } from "../../src/index.ts";
import { sweepOverdue, SWEEP_OVERDUE_FACTOR } from "../../src/engine/why.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const napper = workflow("whysw_nap", async (ctx) => {
  await sleep(ctx, 3600);
});
let cadenced: TestApp;
let unknown: TestApp;

async function whyOf(app: TestApp, id: string): Promise<WhyView> {
  const res = await app.edda.fetch(new Request(`http://localhost/instances/${id}/why`));
  expect(res.status).toBe(200);
  return (await res.json()) as WhyView;
}
async function readySweep(app: TestApp): Promise<{ lastRunAt: string | null; expectedEverySeconds: number | null; overdue: boolean }> {
  await new Promise((r) => setTimeout(r, 1100)); // /readyz answers one outcome for a second
  const res = await app.edda.fetch(new Request("http://localhost/readyz"));
  expect(res.status).toBe(200);
  return ((await res.json()) as { sweep: { lastRunAt: string | null; expectedEverySeconds: number | null; overdue: boolean } }).sweep;
}

beforeAll(async () => {
  const pg = await freshPostgres("why_sweep");
  cadenced = makeTestApp(pg.open(), { workflows: [napper], sweepIntervalSeconds: 0.4 });
  unknown = makeTestApp(pg.open(), { workflows: [napper] });
});
afterAll(async () => {
  for (const x of [cadenced, unknown]) await x.edda.close();
  for (const x of [cadenced, unknown]) await x.database.close();
});

describe("an overdue sweep", () => {
  it("sweepOverdue: never run or older than five cadences; an unknown cadence is never overdue", () => {
    const now = Date.parse("2026-12-04T12:00:00Z");
    expect(SWEEP_OVERDUE_FACTOR).toBe(5);
    expect(sweepOverdue(null, now, 60)).toBe(true);
    expect(sweepOverdue(new Date(now - 299_000), now, 60)).toBe(false);
    expect(sweepOverdue(new Date(now - 301_000), now, 60)).toBe(true);
    expect(sweepOverdue(null, now, null)).toBe(false);
    expect(sweepOverdue(new Date(0), now, null)).toBe(false);
  });

  it("is named in why and in /readyz: never swept, then swept, then left alone past five cadences", async () => {
    const { instanceId } = await cadenced.edda.start("whysw_nap", undefined, { instanceId: "whysw-1" });
    await cadenced.waitFor(instanceId, ["waiting_for_timer"]);
    let why = await whyOf(cadenced, instanceId);
    expect(why.reason.kind).toBe("timer");
    expect(why.reason.facts).toMatchObject({ lastSweepAt: null, sweepOverdue: true });
    expect(why.reason.detail).toMatch(/no sweep has run its timers task yet/);
    expect(await readySweep(cadenced)).toEqual({ lastRunAt: null, expectedEverySeconds: 0.4, overdue: true });
    // An app that does not know its cadence says when the sweep ran (never), not that it is late.
    expect((await whyOf(unknown, instanceId)).reason.facts).toMatchObject({ lastSweepAt: null, sweepOverdue: false });
    expect(await readySweep(unknown)).toMatchObject({ expectedEverySeconds: null, overdue: false });

    await cadenced.edda.sweep();
    why = await whyOf(cadenced, instanceId);
    expect(why.reason.facts).toMatchObject({ sweepOverdue: false });
    expect(typeof (why.reason.facts as { lastSweepAt: unknown }).lastSweepAt).toBe("string");
    expect(why.reason.detail).not.toMatch(/overdue/);

    await new Promise((r) => setTimeout(r, SWEEP_OVERDUE_FACTOR * 400 + 300));
    why = await whyOf(cadenced, instanceId);
    expect(why.reason.facts).toMatchObject({ sweepOverdue: true });
    expect(why.reason.detail).toMatch(/overdue: sweeps are expected every 0\.4 s/);
    const sweep = await readySweep(cadenced);
    expect(sweep.overdue).toBe(true);
    expect(sweep.lastRunAt).not.toBeNull();
  });
});
