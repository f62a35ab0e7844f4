// Crash recovery with real processes: worker A (a Node server) is killed with
// SIGKILL in the middle of a long non-transactional activity. While A lives,
// its lease renewals keep worker B's sweeper away; once A is gone its 2 s
// lease expires, B's sweeper releases it and resumes the instance, and the
// activity runs again — at-least-once, as documented for non-transactional
// activities: its side effect is visible twice under one idempotency key,
// and the history records one result.
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import { queryRows } from "../../src/storage/database.ts";
import { api, waitForStatus } from "./processes.ts";
import { startWorkerPair } from "./worker-setup.ts";

const SCRIPT = join(import.meta.dirname, "fixtures", "recovery-worker.ts");
const p = startWorkerPair("recovery", SCRIPT, {
  secret: "recovery-secret",
  slowMs: 600_000,
  prepare: async (db) => {
    await db.db.execute(sql`CREATE TABLE recovery_effects (id serial PRIMARY KEY, idempotency_key text NOT NULL, worker text NOT NULL)`);
  },
});

const effects = () => queryRows<{ idempotency_key: string; worker: string }>(p.db.db, sql`SELECT idempotency_key, worker FROM recovery_effects ORDER BY id`);
const lockedBy = async (id: string) => (await queryRows<{ locked_by: string | null }>(p.db.db, sql`SELECT locked_by FROM workflow_instances WHERE instance_id = ${id}`))[0]?.locked_by;

it("a worker killed mid-activity: after its lease expires another worker's sweeper resumes the instance to completion", { timeout: 40_000 }, async () => {
  const started = await api<{ instanceId: string }>(p.a.url, "POST", "/workflows/recovery_charge/instances", { input: 42, instanceId: "crash-1" });
  expect(started.status).toBe(201);
  const deadline = Date.now() + 10_000;
  while ((await effects()).length === 0) {
    if (Date.now() > deadline) throw new Error(`activity never started:\n${p.a.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  // A keeps renewing its 2 s lease: B's sweeps (every 300 ms) leave the instance alone.
  await new Promise((r) => setTimeout(r, 3000));
  expect(await effects()).toHaveLength(1);
  expect(await lockedBy("crash-1")).toMatch(/^worker-a:/);

  await p.a.stop("SIGKILL");
  // Issue 37: what GET /instances/:id/why says from B after the kill -9, polled until the end. The lease of the
  // dead engine still reads as its step running until it expires (until = the lease's end, 2 s at most away),
  // then leased by it (for as long as B's next sweep, 300 ms, takes to retake it), then B's step, then none.
  type Why = { reason: { kind: string; until?: string; blockedBy?: string[]; facts: { engine?: string } } };
  const seen: Why["reason"][] = [];
  for (let i = 0; i < 1000; i++) {
    const r = (await api<Why>(p.b.url, "GET", "/instances/crash-1/why")).body.reason;
    if (seen.at(-1)?.kind !== r.kind || seen.at(-1)?.facts.engine !== r.facts.engine) seen.push(r);
    if (r.kind === "none") break;
    await new Promise((res) => setTimeout(res, 20));
  }
  const first = seen[0]!;
  expect(first).toMatchObject({ kind: "running", facts: { engine: expect.stringMatching(/^worker-a:/) } });
  expect(first.blockedBy).toEqual([first.facts.engine]);
  expect(new Date(first.until!).getTime() - Date.now()).toBeLessThan(2_500);
  expect(seen.at(-1)!.kind).toBe("none");
  for (const r of seen.slice(1, -1)) {
    if (r.kind === "leased") expect(r.facts.engine).toBe(first.facts.engine);
    else expect(r).toMatchObject({ kind: "running", facts: { engine: expect.stringMatching(/^worker-b:/) } });
  }
  const done = await waitForStatus(p.b.url, "crash-1", ["completed", "failed"], 20_000);
  expect(done.status).toBe("completed");
  expect(done.output).toEqual({ charged: 42, by: "worker-b", receipt: "receipt for 42" });

  const rows = await effects();
  expect(rows.map((r) => r.worker)).toEqual(["worker-a", "worker-b"]);
  expect(new Set(rows.map((r) => r.idempotency_key))).toEqual(new Set(["crash-1:recovery_charge_card:1"]));
  const history = await queryRows<{ activity_id: string; event_type: string }>(p.db.db, sql`SELECT activity_id, event_type FROM workflow_history WHERE instance_id = 'crash-1' ORDER BY id`);
  expect(history.filter((h) => h.activity_id === "recovery_charge_card:1")).toEqual([{ activity_id: "recovery_charge_card:1", event_type: "ActivityCompleted" }]);
  expect(await lockedBy("crash-1")).toBeNull();
});
