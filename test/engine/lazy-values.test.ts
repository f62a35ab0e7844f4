// Values by reference are loaded when the workflow code takes them (core/replay.ts DeferredValues), not
// when a step leases its history: on real Postgres, with the default table store wrapped to count what
// each step reads from it. An instance holds 20 results of 300 KiB each (by reference) and waits for a
// message: the cold step the message wakes reads each result once, as the code takes it (a Promise.all's
// twenty in one read); a cancel's twenty compensation steps read none (their code takes no result, where
// each used to load all twenty); a replay that diverges from its history at the first record reads none.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, registerCompensation, waitMessage, workflow, type Edda } from "../../src/index.ts";
import type { EddaOptions } from "../../src/edda.ts";
import { postgresValues, type LargeValueStore } from "../../src/storage/payload-refs.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const KiB = 1024;
const part = activity("lazy_part", async (_ctx, i: number) => `${i}:${"p".repeat(300 * KiB)}`);
const undoRuns: number[] = [];
const undoPart = activity("lazy_undo", async (_ctx, i: number) => {
  undoRuns.push(i);
  return i;
});

/** 20 large results, sequential (a compensation registered for each) or together, then a message. */
const twenty = workflow("lazy_twenty", async (ctx, input: { together: boolean }) => {
  let sizes: number[];
  if (input.together) sizes = (await Promise.all(Array.from({ length: 20 }, (_, i) => part(ctx, i)))).map((r) => r.length);
  else {
    sizes = [];
    for (let i = 0; i < 20; i++) {
      await registerCompensation(ctx, undoPart, i);
      sizes.push((await part(ctx, i)).length);
    }
  }
  const go = await waitMessage<{ note: string }>(ctx, "go");
  return { sizes: sizes.length, total: sizes.reduce((a, b) => a + b, 0), note: go.data.note };
});

/** The same name, other code: its first operation is not the one history holds (a deploy that changed it). */
const changed = workflow("lazy_twenty", async (ctx) => {
  await undoPart(ctx, -1);
  return null;
});

/** Reads of the store: one entry per `get`, with the refs it asked for. */
const reads: string[][] = [];
const counting: LargeValueStore = {
  ...postgresValues,
  get(ex, instanceId, refs) {
    reads.push([...refs]);
    return postgresValues.get(ex, instanceId, refs);
  },
};

let pg: Awaited<ReturnType<typeof freshPostgres>>;
const apps: TestApp[] = [];
const app = (workflows: EddaOptions["workflows"] = [twenty]) => {
  // One deployment id for every app here (EDDA_DEPLOYMENT kept across code changes): the changed code takes the
  // instance over and parks it; a new id would leave it on the code that started it (issue 38).
  const a = makeTestApp(pg.open(), { workflows, largeValues: { store: counting }, deployment: "lazy-prod" });
  apps.push(a);
  return a;
};

/** Poll the instance without its history (a history read would load every value by reference). */
async function settled(edda: Edda, id: string, statuses: string[], timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const inst = await edda.getInstance(id);
    if (inst && statuses.includes(inst.status)) return inst;
    if (Date.now() > deadline) throw new Error(`instance ${id} did not reach ${statuses.join("/")} (now ${inst?.status})`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Start an instance, let it record its 20 results and wait for "go"; the reads start counting from there. */
async function waitingWithTwenty(a: TestApp, id: string, together: boolean): Promise<void> {
  await a.edda.start("lazy_twenty", { together }, { instanceId: id });
  const w = await settled(a.edda, id, ["waiting_for_message", "failed"]);
  expect(w.status, JSON.stringify(w.error ?? w)).toBe("waiting_for_message");
  reads.length = 0;
}

beforeAll(async () => {
  pg = await freshPostgres("lazy_values");
});
afterAll(async () => {
  for (const a of apps) await a.edda.close();
});

describe("replay past 20 large results reads none it does not use (Postgres)", () => {
  it("the cold step a message wakes reads each result once, as its code takes it", { timeout: 120_000 }, async () => {
    const a = app();
    await waitingWithTwenty(a, "lazy-seq", false);
    await a.edda.publish("go", { note: "n1" }, { targetInstanceId: "lazy-seq" });
    const done = await settled(a.edda, "lazy-seq", ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ sizes: 20, total: 20 * 300 * KiB + 10 * 2 + 10 * 3, note: "n1" });
    const refs = reads.flat();
    expect(refs).toHaveLength(20); // the twenty results, none twice, nothing else
    expect(new Set(refs).size).toBe(20);
  });

  it("twenty results a Promise.all takes are read in one statement", { timeout: 120_000 }, async () => {
    const a = app();
    await waitingWithTwenty(a, "lazy-all", true);
    await a.edda.publish("go", { note: "n2" }, { targetInstanceId: "lazy-all" });
    const done = await settled(a.edda, "lazy-all", ["completed", "failed"]);
    expect(done.output).toMatchObject({ sizes: 20, note: "n2" });
    expect(reads).toHaveLength(1);
    expect(reads[0]).toHaveLength(20);
  });

  it("a cancel's twenty compensation steps read none of the results", { timeout: 120_000 }, async () => {
    const a = app();
    await waitingWithTwenty(a, "lazy-cancel", false);
    undoRuns.length = 0;
    await a.edda.cancel("lazy-cancel");
    const done = await settled(a.edda, "lazy-cancel", ["cancelled", "failed"]);
    expect(done.status).toBe("cancelled");
    expect(undoRuns.sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(reads).toEqual([]);
  });

  it("a replay that diverges from its history at the first record reads none, and the instance parks", { timeout: 120_000 }, async () => {
    const first = app();
    await waitingWithTwenty(first, "lazy-park", false);
    await first.edda.close();
    apps.splice(apps.indexOf(first), 1);
    const other = app([changed]);
    await other.edda.publish("go", { note: "n3" }, { targetInstanceId: "lazy-park" });
    const parked = await settled(other.edda, "lazy-park", ["parked", "failed", "completed"]);
    expect(parked.status).toBe("parked");
    expect(reads).toEqual([]);
  });
});
