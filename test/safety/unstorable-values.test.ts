// The poison family for values user code hands to Edda that JSON cannot hold:
// a BigInt, a cycle, a function, a symbol, a class instance whose toJSON
// throws. Regression: an activity result like that was encoded while the step
// concluded, outside the attempt; the TypeError escaped the step, counted
// towards quarantine, and every retried step ran the body again (5 runs with
// maxAttempts: 2, then `quarantined`). Now each slot — an activity's result,
// a workflow's output, the input of `invoke` / `startChild` / `start`, message
// data and metadata sent from workflow code, an outbox event's data sent
// from an activity, a compensation's arguments — fails once with an
// UnserializableValueError that names the slot: never retried, the body runs
// once, the workflow can catch it, nothing is counted against the instance,
// and valid traffic and the sweeper go on. On real Postgres.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, invoke, publish, registerCompensation, sendEventTransactional, sendTo, startChild, UnserializableValueError, workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

class Money {
  constructor(readonly cents: number) {}
  toJSON(): never {
    throw new Error("Money has no JSON form");
  }
}

/** Built in the process that runs the code (the input names the kind: inputs must be storable). */
const UNSTORABLE: Record<string, () => unknown> = {
  bigint: () => BigInt(7),
  "nested bigint": () => ({ items: [1, { n: BigInt(2) }] }),
  cycle: () => {
    const o: Record<string, unknown> = { a: 1 };
    o.self = o;
    return o;
  },
  function: () => ({ onDone: () => "x" }),
  symbol: () => Symbol("s"),
  "toJSON that throws": () => ({ price: new Money(100) }),
};
const KINDS = Object.keys(UNSTORABLE);

let t: TestApp;
const runs = new Map<string, number>();
const ran = (id: string) => runs.set(id, (runs.get(id) ?? 0) + 1);

interface Caught {
  name: string;
  typed: boolean;
  slot: string;
  after: string;
}
const caught = (e: unknown): Omit<Caught, "after"> => ({
  name: (e as Error).name,
  typed: e instanceof UnserializableValueError,
  slot: String((e as UnserializableValueError).slot),
});

const echo = activity("u_echo", async (_ctx, v: string) => v);
// Transactional (the default): its row must roll back with the failed attempt.
const makeInside = activity(
  "u_make_inside",
  async (ctx, kind: string) => {
    ran(ctx.instanceId);
    await ctx.tx.execute(sql`INSERT INTO u_rows (instance_id) VALUES (${ctx.instanceId})`);
    return UNSTORABLE[kind]!();
  },
  { retry: { maxAttempts: 2, initialIntervalSeconds: 0.05 } },
);
const makeOutside = activity(
  "u_make_outside",
  async (ctx, kind: string) => {
    ran(ctx.instanceId);
    return UNSTORABLE[kind]!();
  },
  { transactional: false, retry: { maxAttempts: 2, initialIntervalSeconds: 0.05 } },
);

const result = workflow("u_result", async (ctx, input: { kind: string; transactional: boolean }) => {
  try {
    await (input.transactional ? makeInside : makeOutside)(ctx, input.kind);
    return "stored";
  } catch (e) {
    return { ...caught(e), after: await echo(ctx, "after") } satisfies Caught;
  }
});
const outputAfterActivity = workflow("u_output_after", async (ctx, kind: string) => {
  await echo(ctx, "first");
  return UNSTORABLE[kind]!();
});
const outputAtOnce = workflow("u_output_now", async (_ctx, kind: string) => UNSTORABLE[kind]!());
const child = workflow("u_child", async (_ctx, input: unknown) => input);
const invoker = workflow("u_invoker", async (ctx, input: { kind: string; detached: boolean }) => {
  try {
    if (input.detached) await startChild(ctx, child, UNSTORABLE[input.kind]!());
    else await invoke(ctx, child, UNSTORABLE[input.kind]!());
    return "started";
  } catch (e) {
    return { ...caught(e), after: await echo(ctx, "after") } satisfies Caught;
  }
});
const sender = workflow("u_sender", async (ctx, input: { kind: string; how: "publish" | "sendTo" | "metadata" }) => {
  const bad = UNSTORABLE[input.kind]!();
  try {
    if (input.how === "publish") await publish(ctx, "u-chan", bad);
    else if (input.how === "sendTo") await sendTo(ctx, ctx.instanceId, "u-self", bad);
    else await publish(ctx, "u-chan", "fine", { metadata: { bad } });
    return "sent";
  } catch (e) {
    return { ...caught(e), after: await echo(ctx, "after") } satisfies Caught;
  }
});

const undo = activity("u_undo", async (_ctx, _v: unknown) => null);
const compensating = workflow("u_compensating", async (ctx, kind: string) => {
  try {
    await registerCompensation(ctx, undo, UNSTORABLE[kind]!());
    return "registered";
  } catch (e) {
    return { ...caught(e), after: await echo(ctx, "after") } satisfies Caught;
  }
});
const announce = activity("u_announce", async (ctx, kind: string) => {
  ran(ctx.instanceId);
  return sendEventTransactional(ctx, { type: "u.announced", source: "/u", data: UNSTORABLE[kind]!() });
});
const announcer = workflow("u_announcer", async (ctx, kind: string) => {
  try {
    await announce(ctx, kind);
    return "announced";
  } catch (e) {
    return { ...caught(e), after: await echo(ctx, "after") } satisfies Caught;
  }
});

beforeAll(async () => {
  const database = await openTestDatabase("postgres-js", "unstorable");
  t = makeTestApp(database, { workflows: [result, outputAfterActivity, outputAtOnce, child, invoker, sender, compensating, announcer], quarantineAfterFailures: 3 });
  await database.db.execute(sql`CREATE TABLE u_rows (instance_id text NOT NULL)`);
});
afterAll(async () => {
  await t?.edda.close();
  await t?.database.close();
});

const expectCaught = (output: unknown, slot: RegExp) => {
  const c = output as Caught;
  expect(c).toMatchObject({ name: "UnserializableValueError", typed: true, after: "after" });
  expect(c.slot).toMatch(slot);
};

/** Nothing was counted against the instance: no failure, never quarantined. */
async function expectNotCounted(instanceId: string) {
  const [row] = await queryRows<{ failure_count: number; status: string }>(t.database.db, sql`SELECT failure_count, status FROM workflow_instances WHERE instance_id = ${instanceId}`);
  expect(row!.status).not.toBe("quarantined");
  expect(Number(row!.failure_count)).toBe(0);
}

it("an activity result JSON cannot hold: the body runs once, its transaction rolls back, the workflow catches the typed error (maxAttempts 2)", async () => {
  const started = [];
  for (const kind of KINDS) for (const transactional of [true, false]) started.push({ kind, transactional, ...(await t.edda.start("u_result", { kind, transactional })) });
  for (const s of started) {
    const done = await t.waitFor(s.instanceId, ["completed", "failed", "quarantined"]);
    expect(done.status, `${s.kind} (${s.transactional ? "transactional" : "outside"})`).toBe("completed");
    expectCaught(done.output, new RegExp(`result of activity "u_make_${s.transactional ? "inside" : "outside"}"`));
    expect(runs.get(s.instanceId), s.kind).toBe(1);
    await expectNotCounted(s.instanceId);
    const history = done.history!.map((h) => h.eventType);
    expect(history).not.toContain("ActivityAttemptFailed");
  }
  const [rows] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM u_rows`);
  expect(Number(rows!.n)).toBe(0);
});

it("a workflow output JSON cannot hold: the run fails once with the typed error, not quarantined", async () => {
  const started = [];
  for (const kind of KINDS) for (const name of ["u_output_after", "u_output_now"]) started.push({ kind, name, ...(await t.edda.start(name, kind)) });
  for (const s of started) {
    const done = await t.waitFor(s.instanceId, ["completed", "failed", "quarantined"]);
    expect(done.status, `${s.name} ${s.kind}`).toBe("failed");
    expect(done.error).toMatchObject({ error_type: "UnserializableValueError" });
    expect(JSON.stringify(done.error)).toMatch(/the workflow's output cannot be stored as JSON/);
    await expectNotCounted(s.instanceId);
  }
});

it("a child's input JSON cannot hold (invoke, startChild): caught by the parent, no child created", async () => {
  const started = [];
  for (const kind of KINDS) for (const detached of [false, true]) started.push({ kind, ...(await t.edda.start("u_invoker", { kind, detached })) });
  for (const s of started) {
    const done = await t.waitFor(s.instanceId, ["completed", "failed", "quarantined"]);
    expect(done.status, s.kind).toBe("completed");
    expectCaught(done.output, /the input of workflow "u_child"/);
    await expectNotCounted(s.instanceId);
    const [children] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE parent_instance_id = ${s.instanceId}`);
    expect(Number(children!.n)).toBe(0);
  }
  // From outside a workflow the start is refused before anything is stored.
  await expect(t.edda.start("u_child", UNSTORABLE.bigint!())).rejects.toBeInstanceOf(UnserializableValueError);
});

it("message data or metadata JSON cannot hold, sent from workflow code: caught, nothing published", async () => {
  const started = [];
  for (const kind of KINDS) for (const how of ["publish", "sendTo", "metadata"] as const) started.push({ kind, how, ...(await t.edda.start("u_sender", { kind, how })) });
  for (const s of started) {
    const done = await t.waitFor(s.instanceId, ["completed", "failed", "quarantined"]);
    expect(done.status, `${s.how} ${s.kind}`).toBe("completed");
    expectCaught(done.output, s.how === "metadata" ? /message metadata on channel "u-chan"/ : /message data on channel/);
    await expectNotCounted(s.instanceId);
  }
  const [messages] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM channel_messages`);
  expect(Number(messages!.n)).toBe(0);
});

it("a compensation's arguments JSON cannot hold: the registration fails, caught, nothing registered", async () => {
  const started = [];
  for (const kind of KINDS) started.push({ kind, ...(await t.edda.start("u_compensating", kind)) });
  for (const s of started) {
    const done = await t.waitFor(s.instanceId, ["completed", "failed", "quarantined"]);
    expect(done.status, s.kind).toBe("completed");
    expectCaught(done.output, /the arguments of compensation "u_undo"/);
    await expectNotCounted(s.instanceId);
  }
  const [rows] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_compensations`);
  expect(Number(rows!.n)).toBe(0);
});

it("an outbox event's data JSON cannot hold, sent from an activity: the activity fails once, caught, no event stored", async () => {
  const started = [];
  for (const kind of KINDS) started.push({ kind, ...(await t.edda.start("u_announcer", kind)) });
  for (const s of started) {
    const done = await t.waitFor(s.instanceId, ["completed", "failed", "quarantined"]);
    expect(done.status, s.kind).toBe("completed");
    expectCaught(done.output, /the data of event "u.announced"/);
    expect(runs.get(s.instanceId), s.kind).toBe(1);
    await expectNotCounted(s.instanceId);
  }
  const [rows] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM outbox_events`);
  expect(Number(rows!.n)).toBe(0);
});

it("afterwards valid traffic flows and every sweep task succeeds", async () => {
  const ok = await t.edda.start("u_result", { kind: "bigint", transactional: true });
  const fine = await t.edda.start("u_child", { plain: [1, "two", null] });
  expect((await t.waitFor(fine.instanceId)).output).toEqual({ plain: [1, "two", null] });
  expect((await t.waitFor(ok.instanceId)).status).toBe("completed");
  const report = await t.edda.sweep({ resumeIdleSeconds: 0 });
  expect(report.failures).toEqual([]);
  expect(report.rowFailures).toEqual([]);
  const [quarantined] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE status = 'quarantined'`);
  expect(Number(quarantined!.n)).toBe(0);
});
