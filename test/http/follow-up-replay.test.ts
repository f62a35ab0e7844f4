// Signed follow-ups are single-use (issue 42), on a real Node server with the
// http dispatcher and real Postgres: every follow-up request the dispatcher
// sends is captured on its way out, and each one replayed (inside its
// signature window, as the attacker holding it would) runs no step — no
// activity runs again, no history row, no lease taken, the row untouched —
// because each request names the lease it continues and that lease has moved
// on. This holds for the chain's hand-offs and for wake-ups (a message to a
// waiting instance), which the sender now hands a lease of their own. A
// replayed batch of many steps runs none of them. Valid traffic flows after,
// and the sweep succeeds. The same replays in workerd and Deno:
// test/runtime/follow-up-replay.test.ts.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEdda, engineOf, type Edda } from "../../src/edda.ts";
import { activity, waitMessage, workflow } from "../../src/index.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER } from "../../src/core/signature.ts";
import { freshPostgres } from "../support/engine.ts";
import { listen, type Listening } from "../support/listen.ts";

const runs: Record<string, number> = {};
const count = (name: string) => activity(name, async (_ctx, id: string) => ((runs[`${name}:${id}`] = (runs[`${name}:${id}`] ?? 0) + 1), name));
const first = count("fr_first");
const second = count("fr_second");
const third = count("fr_third");
const chain = workflow("fr_chain", async (ctx, id: string) => {
  await first(ctx, id);
  await second(ctx, id);
  const go = await waitMessage(ctx, "fr-go");
  await third(ctx, id);
  return go.data;
});

interface Captured {
  body: string;
  headers: Record<string, string>;
}

let database: Database;
let edda: Edda;
let server: Listening;
const captured: Captured[] = [];

beforeAll(async () => {
  const pg = await freshPostgres("follow_up_replay");
  database = pg.open();
  let app: Edda | undefined;
  server = await listen((req) => app!.app.fetch(req));
  edda = app = createEdda({
    workflows: [chain],
    database,
    secret: "fr-secret",
    viewer: false,
    // The http dispatcher, with a fetch that keeps a copy of every request it sends (what a network tap sees).
    dispatcher: {
      http: {
        baseUrl: server.url,
        fetch: async (input, init) => {
          const headers = Object.fromEntries(new Headers(init?.headers).entries());
          captured.push({ body: String(init?.body), headers });
          return fetch(input, init);
        },
      },
    },
  });
});
afterAll(async () => {
  await server.close();
  await edda.close();
  await database.close();
});

const row = async (id: string) =>
  (await queryRows<{ status: string; lock_token: string; locked_by: string | null; updated_at: string; history: string }>(
    database.db,
    sql`SELECT status, lock_token::text, locked_by, updated_at::text, (SELECT count(*)::text FROM workflow_history h WHERE h.instance_id = i.instance_id) AS history
        FROM workflow_instances i WHERE instance_id = ${id}`,
  ))[0]!;

async function waitStatus(id: string, status: string) {
  for (let i = 0; i < 200; i++) {
    const r = await row(id);
    if (r.status === status && r.locked_by === null) return r;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${id} never reached ${status}`);
}

const replay = (c: Captured) => fetch(`${server.url}/_edda/step`, { method: "POST", headers: c.headers, body: c.body });
/** The replays run in the receiver's background work: give it time, then the state is what it was. */
const settle = () => new Promise((r) => setTimeout(r, 400));

describe("signed follow-ups are single-use (issue 42)", () => {
  it("each captured follow-up of a run, replayed inside its window, runs no step — while the instance waits and after it finished", async () => {
    await edda.start(chain, "a", { instanceId: "fr-a" });
    const waiting = await waitStatus("fr-a", "waiting_for_message");
    expect(runs).toMatchObject({ "fr_first:a": 1, "fr_second:a": 1 });
    const chainRequests = captured.splice(0);
    expect(chainRequests.length).toBeGreaterThanOrEqual(2);
    for (const c of chainRequests) {
      expect(c.headers[SIGNATURE_HEADER]).toMatch(/^sha256=/);
      expect(JSON.parse(c.body)).toMatchObject({ instanceId: "fr-a", lease: { workerId: expect.any(String), token: expect.any(Number) } });
    }
    // Replayed while it waits: each is acknowledged and runs nothing.
    for (const c of chainRequests) expect((await replay(c)).status).toBe(202);
    await settle();
    expect(await row("fr-a")).toEqual(waiting);
    expect(runs).toMatchObject({ "fr_first:a": 1, "fr_second:a": 1 });

    // The wake-up a message causes leaves with a lease of its own (the sender's hand-off), so it is single-use too.
    await edda.publish("fr-go", "went", { targetInstanceId: "fr-a" });
    const done = await waitStatus("fr-a", "completed");
    const wakeRequests = captured.splice(0);
    expect(wakeRequests.length).toBeGreaterThanOrEqual(1);
    for (const c of wakeRequests) expect(JSON.parse(c.body)).toHaveProperty("lease");
    for (const c of [...chainRequests, ...wakeRequests]) expect((await replay(c)).status).toBe(202);
    await settle();
    expect(await row("fr-a")).toEqual(done);
    expect(runs).toEqual({ "fr_first:a": 1, "fr_second:a": 1, "fr_third:a": 1 });
    expect((await edda.getInstance("fr-a"))?.output).toBe("went");

    // The engine says why: the step it was asked for is stale.
    const e = await engineOf(edda);
    for (const c of [...chainRequests, ...wakeRequests]) {
      const { hop: _hop, ...req } = JSON.parse(c.body) as { hop: number; instanceId: string };
      expect(await e.runStep(req)).toEqual({ status: "skipped", reason: expect.stringMatching(/^stale follow-up/) });
    }
  });

  it("a replay that races the live step (the instance runnable again) still runs nothing: its lease is not the current one", async () => {
    await edda.start(chain, "b", { instanceId: "fr-b" });
    await waitStatus("fr-b", "waiting_for_message");
    const old = captured.splice(0);
    // The wake-up commits, then the replays arrive together with the real follow-up.
    await edda.publish("fr-go", "b-went", { targetInstanceId: "fr-b" });
    await Promise.all(old.map(replay));
    await waitStatus("fr-b", "completed");
    await settle();
    expect(runs).toMatchObject({ "fr_first:b": 1, "fr_second:b": 1, "fr_third:b": 1 });
    captured.splice(0);
  });

  it("an instance left runnable for the sweep (past the hop bound) is not run by a replay: the request's lease is spent", async () => {
    // A second app whose chains stop after one hop: the step after it is the sweep's, the instance runnable and unlocked.
    const taps: Captured[] = [];
    const ref: { edda?: Edda } = {};
    const shortServer = await listen((req) => ref.edda!.app.fetch(req));
    const short = (ref.edda = createEdda({
      workflows: [chain],
      database,
      secret: "fr-secret",
      viewer: false,
      dispatcher: { http: { baseUrl: shortServer.url, maxHops: 1, fetch: async (input, init) => (taps.push({ body: String(init?.body), headers: Object.fromEntries(new Headers(init?.headers).entries()) }), fetch(input, init)) } },
    }));
    try {
      await short.start(chain, "h", { instanceId: "fr-hops" });
      for (let i = 0; i < 100 && !(runs["fr_first:h"] === 1 && (await row("fr-hops")).locked_by === null); i++) await new Promise((r) => setTimeout(r, 50));
      const parked = await row("fr-hops");
      expect(parked).toMatchObject({ status: "running", locked_by: null });
      expect(runs["fr_second:h"]).toBeUndefined();
      expect(taps.length).toBe(1);
      // Before single-use follow-ups, this replay took the free lease and ran the next step for whoever held the request.
      for (let i = 0; i < 3; i++) expect((await fetch(`${shortServer.url}/_edda/step`, { method: "POST", headers: taps[0]!.headers, body: taps[0]!.body })).status).toBe(202);
      await settle();
      expect(await row("fr-hops")).toEqual(parked);
      expect(runs["fr_second:h"]).toBeUndefined();
      // The sweep is what moves it on (one hop a sweep here).
      for (let i = 0; i < 40 && (await row("fr-hops")).status !== "waiting_for_message"; i++) {
        await short.sweep();
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await row("fr-hops")).status).toBe("waiting_for_message");
      expect(runs["fr_second:h"]).toBe(1);
    } finally {
      await shortServer.close();
      await short.close();
    }
  });

  it("one signed batch naming many stale leases runs none of them; a live batch still runs; the sweep succeeds", async () => {
    const ids = Array.from({ length: 20 }, (_, i) => `fr-batch-${i}`);
    for (const id of ids) await edda.start(chain, id, { instanceId: id });
    for (const id of ids) await waitStatus(id, "waiting_for_message");
    type Sent = { instanceId: string; lease: unknown };
    // A request carries one step, or several of one turn as `steps`.
    const leases = captured.splice(0).flatMap((c) => {
      const b = JSON.parse(c.body) as Sent & { steps?: Sent[] };
      return b.steps ?? [b];
    });
    expect(new Set(leases.map((l) => l.instanceId))).toEqual(new Set(ids));
    for (const l of leases) expect(l.lease).toMatchObject({ token: expect.any(Number) });
    const before = await Promise.all(ids.map(row));
    // A batch body the way the dispatcher's continuation sends one, signed with the deployment's secret.
    const { sign } = await import("../../src/core/signature.ts");
    const body = JSON.stringify({ steps: leases.map(({ instanceId, lease }) => ({ instanceId, lease })), hop: 1 });
    const headers = { "content-type": "application/json", ...(await sign("fr-secret", { method: "POST", path: "/_edda/step", body })) };
    for (let i = 0; i < 3; i++) expect((await fetch(`${server.url}/_edda/step`, { method: "POST", headers, body })).status).toBe(202);
    await settle();
    expect(await Promise.all(ids.map(row))).toEqual(before);
    for (const id of ids) expect(runs[`fr_second:${id}`]).toBe(1);
    expect(headers[TIMESTAMP_HEADER]).toBeDefined();

    // Valid traffic flows: the messages finish every one of them, and the sweep runs clean.
    for (const id of ids) await edda.publish("fr-go", id, { targetInstanceId: id });
    for (const id of ids) await waitStatus(id, "completed");
    for (const id of ids) expect(runs[`fr_third:${id}`]).toBe(1);
    const report = await edda.sweep();
    expect(report).toBeTypeOf("object");
  });
});
