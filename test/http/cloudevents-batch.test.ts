// CloudEvents batches on real Postgres: a batch is one transaction (a fault on
// its last event, injected by a trigger in this test's own database, leaves
// no trace of the events before it), and batches racing over the same
// channels and the same (source, id) keys in opposite orders neither deadlock
// nor store an event twice.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows } from "../../src/storage/database.ts";
import { makeTestApp, openTestDatabase, type TestApp } from "../support/engine.ts";

let t: TestApp;

beforeAll(async () => {
  t = makeTestApp(await openTestDatabase("postgres-js", "ce_batch"), { workflows: [] });
  await t.database.db.execute(
    sql.raw(`
    CREATE FUNCTION refuse_exploding_channel() RETURNS trigger AS $$
    BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql;
    CREATE TRIGGER refuse_exploding_channel BEFORE INSERT ON channel_messages
      FOR EACH ROW WHEN (NEW.channel = 'batch.explode') EXECUTE FUNCTION refuse_exploding_channel();`),
  );
});
afterAll(async () => {
  await t.edda.close();
  await t.database.close();
});

const post = async (events: unknown[]): Promise<Response> =>
  t.edda.app.request("/events", { method: "POST", headers: { "content-type": "application/cloudevents-batch+json" }, body: JSON.stringify(events) });
const event = (id: string, type: string, source = "/batch") => ({ specversion: "1.0", id, source, type, data: { id } });

async function stored(ids: string[]) {
  const [r] = await queryRows<{ d: number; m: number }>(
    t.database.db,
    sql`SELECT (SELECT count(*)::int FROM cloudevent_dedupe WHERE event_id IN ${ids}) AS d,
               (SELECT count(*)::int FROM channel_messages WHERE metadata::jsonb ->> 'ce_id' IN ${ids}) AS m`,
  );
  return { dedupe: Number(r!.d), messages: Number(r!.m) };
}

describe("a CloudEvents batch is one transaction", () => {
  it("a fault on the last event stores none of the batch; the same events without it are accepted", async () => {
    const ids = ["tx-1", "tx-2", "tx-3"];
    const r = await post([event("tx-1", "batch.a"), event("tx-2", "batch.b"), event("tx-3", "batch.explode")]);
    expect(r.status).toBe(500);
    expect(await r.json()).toMatchObject({ error: "internal error", error_type: "InternalError", status: 500, detail: "internal error" });
    expect(await stored(ids)).toEqual({ dedupe: 0, messages: 0 });
    // Not deduplicated away: nothing of the failed batch was recorded.
    const ok = await post([event("tx-1", "batch.a"), event("tx-2", "batch.b")]);
    expect(ok.status).toBe(202);
    expect(((await ok.json()) as { events: { duplicate: boolean }[] }).events.map((e) => e.duplicate)).toEqual([false, false]);
    expect(await stored(ids)).toEqual({ dedupe: 2, messages: 2 });
  });

  it("8 batches racing over the same 10 channels and keys in different orders: all 202, each event stored once", { timeout: 60_000 }, async () => {
    const events = Array.from({ length: 10 }, (_, i) => event(`race-${i}`, `batch.race.${i}`));
    // k * 3 and k * 7 (mod 10) are permutations: every batch orders the same events differently.
    const order = (i: number) => events.map((_, k) => events[(k * (i % 4 < 2 ? 3 : 7) + i) % 10]!);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => post(i % 2 ? order(i).reverse() : order(i))));
    const bodies = await Promise.all(results.map(async (r) => ({ status: r.status, body: (await r.json()) as { events: { id: string; duplicate: boolean }[] } })));
    for (const b of bodies) expect(b.status, JSON.stringify(b.body)).toBe(202);
    // Each event was fresh in exactly one batch.
    for (const e of events) expect(bodies.filter((b) => b.body.events.some((x) => x.id === e.id && !x.duplicate))).toHaveLength(1);
    expect(await stored(events.map((e) => e.id))).toEqual({ dedupe: 10, messages: 10 });
  });
});
