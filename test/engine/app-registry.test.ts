// Activities belong to the app that uses them, not to the process: two apps
// in one process may use the same activity names for different code, and an
// app resolves a compensation it never saw (a fresh process, another
// request) by replaying the workflow that registered it. Real Postgres.
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, createEdda, registerCompensation, TerminalError, workflow, type Edda } from "../../src/index.ts";
import { engineOf } from "../../src/edda.ts";
import type { Dispatcher, StepRequest } from "../../src/engine/dispatcher.ts";
import type { Database } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

/** One app's definitions: the same names in every app, code that says which app ran it. */
function defineApp(label: string, calls: string[]) {
  const charge = activity("charge", async (_ctx, orderId: string) => `${label}:charged:${orderId}`);
  const refund = activity("refund", async (_ctx, receipt: string) => {
    calls.push(`${label} refunds ${receipt}`);
  });
  const saga = workflow("saga", async (ctx, input: { orderId: string; fail: boolean }) => {
    const receipt = await charge(ctx, input.orderId);
    await registerCompensation(ctx, refund, receipt);
    if (input.fail) throw new TerminalError("shipping failed");
    return receipt;
  });
  return saga;
}

const databases: Database[] = [];
const apps: TestApp[] = [];
const open = async (name: string) => {
  const db = await openTestDatabase("postgres-js", name);
  databases.push(db);
  return db;
};

beforeAll(async () => {
  await Promise.all([open("registry_a"), open("registry_b"), open("registry_cold")]);
}, 60_000);
afterAll(async () => {
  for (const a of apps) await a.edda.close();
  for (const d of databases) await d.close();
});

it("two apps in one process use the same activity names for different code, each its own", async () => {
  const callsA: string[] = [];
  const callsB: string[] = [];
  const a = makeTestApp(databases[0]!, { workflows: [defineApp("A", callsA)] });
  const b = makeTestApp(databases[1]!, { workflows: [defineApp("B", callsB)] });
  apps.push(a, b);

  await a.edda.start("saga", { orderId: "o1", fail: false }, { instanceId: "ok" });
  await b.edda.start("saga", { orderId: "o1", fail: false }, { instanceId: "ok" });
  expect((await a.waitFor("ok")).output).toBe("A:charged:o1");
  expect((await b.waitFor("ok")).output).toBe("B:charged:o1");

  // Compensations are resolved by name at run time: each app runs its own "refund".
  await a.edda.start("saga", { orderId: "o2", fail: true }, { instanceId: "bad" });
  await b.edda.start("saga", { orderId: "o2", fail: true }, { instanceId: "bad" });
  expect((await a.waitFor("bad")).status).toBe("failed");
  expect((await b.waitFor("bad")).status).toBe("failed");
  expect(callsA).toEqual(["A refunds A:charged:o2"]);
  expect(callsB).toEqual(["B refunds B:charged:o2"]);
});

it("one app using two different activities under one name fails the run with an error naming both", async () => {
  const first = activity("same_name", async () => 1);
  const second = activity("same_name", async () => 2);
  const twice = workflow("twice", async (ctx) => (await first(ctx)) + (await second(ctx)));
  const app = makeTestApp(databases[1]!, { workflows: [twice] });
  apps.push(app);
  await app.edda.start(twice, undefined, { instanceId: "twice" });
  const done = await app.waitFor("twice");
  expect(done.status).toBe("failed");
  expect(JSON.stringify(done.error)).toMatch(/activity name \\"same_name\\" is defined twice/);
});

it("an app that never ran the workflow finds its compensation by replaying it", async () => {
  const calls: string[] = [];
  const saga = defineApp("cold", calls);
  // The first app's steps run by hand: each dispatched follow-up is kept, not run.
  const held: StepRequest[] = [];
  const holding: Dispatcher = { attach() {}, dispatch: (req) => void held.push(req) };
  const first: Edda = createEdda({ workflows: [saga], database: databases[2]!, dispatcher: holding });
  const engine = await engineOf(first);
  await first.start(saga, { orderId: "o3", fail: true }, { instanceId: "cold" });
  for (let i = 0; i < 10 && (await first.getInstance("cold"))?.status !== "compensating"; i++) await engine.runStep(held.shift()!);
  expect((await first.getInstance("cold"))?.status).toBe("compensating");
  expect(calls).toEqual([]);

  // A new app on the same database — another process, another request — with an empty registry.
  const second = makeTestApp(databases[2]!, { workflows: [saga] });
  apps.push(second);
  const handedOver = held.shift()!;
  await (await engineOf(second.edda)).runStep(handedOver);
  const done = await second.waitFor("cold");
  expect(done.status).toBe("failed");
  expect(calls).toEqual(["cold refunds cold:charged:o3"]);
  expect(JSON.stringify(done.history)).toContain("CompensationExecuted");
  await first.close();
});
