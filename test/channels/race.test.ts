// Publishers racing subscribers that suspend, on real Postgres with three
// engines on separate connections and no sweeper running: every wake-up must
// come from a post-commit delivery, so a single lost wake-up hangs a test.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publish, receive, subscribe, workflow, type Workflow } from "../../src/index.ts";
import { queryRows } from "../../src/storage/database.ts";
import { jobWorker } from "../../functions/workflows/job-worker.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const consumer = workflow("race_consumer", async (ctx, n: number) => {
  await subscribe(ctx, "race_work", "competing");
  const got: number[] = [];
  for (let i = 0; i < n; i++) got.push((await receive<{ seq: number }>(ctx, "race_work")).data.seq);
  return got;
});

const listener = workflow("race_listener", async (ctx) => {
  await subscribe(ctx, "race_news", "broadcast");
  const got: number[] = [];
  for (;;) {
    const m = await receive<{ seq: number } | "STOP">(ctx, "race_news");
    if (m.data === "STOP") return got;
    got.push(m.data.seq);
  }
});

const workflows: Workflow[] = [consumer, listener, jobWorker];
let apps: TestApp[] = [];
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rand = (n: number) => Math.floor(Math.random() * n);

beforeAll(async () => {
  const pg = await freshPostgres("race");
  apps = [pg.open(), pg.open(), pg.open()].map((db) => makeTestApp(db, { workflows }));
});

afterAll(async () => {
  for (const a of apps) {
    await a.edda.close();
    await a.database.close();
  }
});

async function waitAll(ids: string[], timeoutMs = 60_000) {
  return Promise.all(ids.map((id) => apps[0]!.waitFor(id, ["completed", "failed"], timeoutMs)));
}

describe("channels under concurrency (real Postgres, 3 engines)", () => {
  it("competing: 200 messages from 4 racing publishers to 5 consumers — each consumed exactly once", { timeout: 90_000 }, async () => {
    const consumers = await Promise.all(Array.from({ length: 5 }, (_, i) => apps[i % 3]!.edda.start(consumer, 40)));
    let seq = 0;
    await Promise.all(
      Array.from({ length: 4 }, async (_, p) => {
        for (let i = 0; i < 50; i++) {
          await publish(apps[(p + i) % 3]!.edda, "race_work", { seq: ++seq });
          if (rand(4) === 0) await pause(rand(15));
        }
      }),
    );
    const done = await waitAll(consumers.map((c) => c.instanceId));
    const all = done.flatMap((d) => d.output as number[]);
    expect(done.every((d) => d.status === "completed")).toBe(true);
    expect(all).toHaveLength(200);
    expect(new Set(all).size).toBe(200);
  });

  it("broadcast: subscribers joining mid-stream each get every later message, in order, none lost", { timeout: 90_000 }, async () => {
    const listeners: string[] = [];
    listeners.push((await apps[0]!.edda.start(listener, null)).instanceId);
    // wait until the first listener is subscribed (its first receive is waiting)
    await apps[0]!.waitFor(listeners[0]!, ["waiting_for_message"]);
    for (let n = 1; n <= 150; n++) {
      await publish(apps[n % 3]!.edda, "race_news", { seq: n });
      if (n % 30 === 0 && n < 150) listeners.push((await apps[n % 3]!.edda.start(listener, null)).instanceId);
      if (rand(3) === 0) await pause(rand(10));
    }
    // every listener must be subscribed before STOP, or it would wait forever
    for (const id of listeners) await apps[0]!.waitFor(id, ["waiting_for_message", "running"]);
    for (;;) {
      const subs = await queryRows<{ n: number }>(apps[0]!.database.db, sql`SELECT count(*)::int AS n FROM channel_subscriptions WHERE channel = 'race_news'`);
      if (Number(subs[0]!.n) === listeners.length) break;
      await pause(20);
    }
    await publish(apps[1]!.edda, "race_news", "STOP");
    const done = await waitAll(listeners);
    for (const d of done) {
      const got = d.output as number[];
      // a contiguous run ending at the last message: nothing skipped, nothing reordered
      // (a listener that subscribed after message 150 rightly got none)
      const from = got[0] ?? 151;
      expect(got).toEqual(Array.from({ length: 150 - from + 1 }, (_, i) => from + i));
    }
    expect(done.filter((d) => (d.output as number[]).length > 0).length).toBeGreaterThanOrEqual(3);
    expect((done[0]!.output as number[])[0]).toBe(1);
  });

  it("three job_workers with remaining 10 and 30 jobs in bursts: the union of processed is the 30 ids, no duplicate", { timeout: 90_000 }, async () => {
    const workers = await Promise.all([0, 1, 2].map((i) => apps[i]!.edda.start(jobWorker, { workerId: `w${i}`, remaining: 10 })));
    const published: string[] = [];
    for (let burst = 0; burst < 3; burst++) {
      const ids = await Promise.all(Array.from({ length: 10 }, (_, j) => publish(apps[j % 3]!.edda, "jobs", { burst, j })));
      published.push(...ids);
      await pause(50 + rand(100));
    }
    const done = await waitAll(workers.map((w) => w.instanceId));
    const processed = done.flatMap((d) => (d.output as { processed: string[] }).processed);
    expect(done.every((d) => d.status === "completed" && d.run === 11)).toBe(true);
    expect(processed).toHaveLength(30);
    expect(new Set(processed)).toEqual(new Set(published));
  });
});
