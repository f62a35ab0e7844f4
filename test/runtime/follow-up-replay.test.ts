// Signed follow-ups are single-use in real workerd (`wrangler dev`,
// functions/worker.ts without its queue) and real Deno (functions/deno.ts
// with KV off), on real Postgres (issue 42): the runtime's follow-ups are
// signed fetches to EDDA_PUBLIC_URL, here a proxy that keeps a copy of each
// on its way (what a tap on the wire sees). With EDDA_MAX_HOPS=1 every chain
// stops after one hop, so between sweeps the pipeline sits runnable and
// unlocked — exactly when a replayed request used to run its next step for
// whoever held it. Each captured request, replayed three times inside its
// signature window, is acknowledged and runs nothing (the instance row and
// its history unchanged); signed sweeps then carry the pipeline to its end
// with every step run once, and replays after the end run nothing either.
// The same on Node: test/http/follow-up-replay.test.ts.
import { sql } from "drizzle-orm";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from "../../src/core/signature.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { listen, type Listening } from "../support/listen.ts";
import { api, ROOT, startDeno, startWrangler, type Server } from "./processes.ts";

const SECRET = "replay-secret";

interface Captured {
  body: string;
  headers: Record<string, string>;
}

function replayFlow(name: string, start: (vars: Record<string, string>) => Promise<Server>) {
  describe(`signed follow-ups are single-use in ${name}`, { timeout: 240_000 }, () => {
    let db: Database;
    let proxy: Listening;
    let runtime: Server;
    let target = "";
    const captured: Captured[] = [];
    const wire: string[] = [];

    beforeAll(async () => {
      const url = await freshDatabase(`replay_${name.replace(/\W/g, "_")}`);
      db = createPostgresJsDatabase({ url, max: 2 });
      await migrate(db.db);
      // The tap: forwards everything to the runtime, keeping a copy of each follow-up step request.
      proxy = await listen(async (req) => {
        const u = new URL(req.url);
        const body = await req.text();
        const headers: Record<string, string> = {};
        for (const h of ["content-type", TIMESTAMP_HEADER, SIGNATURE_HEADER]) {
          const v = req.headers.get(h);
          if (v !== null) headers[h] = v;
        }
        const forward = () => fetch(`${target}${u.pathname}${u.search}`, { method: req.method, headers, ...(req.method === "GET" ? {} : { body }) });
        if (u.pathname !== "/_edda/step") return forward();
        captured.push({ body, headers });
        // Acknowledged here and delivered right after, as a relay would: the sending invocation does not wait on
        // the receiving one (workerd does not run a follow-up's background work while its sender still waits on it).
        void forward().then(
          async (res) => wire.push(`${body.slice(0, 120)} -> ${res.status} ${await res.text()}`),
          (err: unknown) => wire.push(`${body.slice(0, 120)} -> ${String(err)}`),
        );
        return Response.json({ accepted: 1 }, { status: 202 });
      });
      runtime = await start({ DATABASE_URL: url, EDDA_SECRET: SECRET, EDDA_ALLOW_UNAUTHENTICATED: "1", EDDA_PUBLIC_URL: proxy.url, EDDA_MAX_HOPS: "1" });
      target = runtime.url;
    }, 180_000);
    afterAll(async () => {
      await runtime?.stop();
      await proxy?.close();
      await db?.close();
    });

    const row = async (id: string) =>
      (await queryRows<{ status: string; lock_token: string; locked_by: string | null; updated_at: string; done: number }>(
        db.db,
        sql`SELECT status, lock_token::text, locked_by, updated_at::text,
                   (SELECT count(*)::int FROM workflow_history h WHERE h.instance_id = i.instance_id AND h.event_type = 'ActivityCompleted') AS done
            FROM workflow_instances i WHERE instance_id = ${id}`,
      ))[0]!;
    const settled = async (id: string) => {
      for (let i = 0; i < 200; i++) {
        const r = await row(id);
        if (r.locked_by === null) return r;
        await new Promise((res) => setTimeout(res, 50));
      }
      throw new Error(`${id} stayed leased: ${JSON.stringify(await row(id))}\n${wire.join("\n")}\n${runtime.output().slice(-3000)}`);
    };
    const replay = (c: Captured) => fetch(`${runtime.url}/_edda/step`, { method: "POST", headers: c.headers, body: c.body });
    const sweep = async () => {
      const body = "{}";
      const res = await fetch(`${runtime.url}/_edda/sweep`, { method: "POST", headers: { "content-type": "application/json", ...(await sign(SECRET, { method: "POST", path: "/_edda/sweep", body })) }, body });
      expect(res.status).toBe(200);
      await res.text();
    };

    /**
     * Replay every captured request three times; the instance must be as it was. A sweep of the runtime's
     * own (Deno.cron) that moved it meanwhile shows as a new captured request: then look again.
     */
    async function replaysRunNothing(id: string) {
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = await settled(id);
        const seen = captured.length;
        const all = captured.slice();
        for (let i = 0; i < 3; i++) {
          for (const c of all) {
            const res = await replay(c);
            const text = await res.text();
            expect(res.status, `${text}\n${wire.join("\n")}\n${runtime.output()}`).toBe(202);
          }
        }
        await new Promise((res) => setTimeout(res, 1500)); // the replays run in the receiver's background work
        if (captured.length !== seen) continue;
        expect(await row(id)).toEqual(before);
        return before;
      }
      throw new Error("the instance kept moving under its own sweeps");
    }

    it("each captured follow-up, replayed while the instance sits runnable between sweeps and after it finished, runs no step", async () => {
      const id = `replay-${name.replace(/\W/g, "-")}`;
      const started = await api<{ instanceId: string }>(runtime.url, "POST", "/workflows/pipeline/instances", { input: { steps: 4 }, instanceId: id });
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      for (let i = 0; i < 200 && (await row(id)).done < 1; i++) await new Promise((res) => setTimeout(res, 50));
      const parked = await settled(id);
      expect(parked).toMatchObject({ status: "running", locked_by: null });
      expect(captured.length).toBeGreaterThanOrEqual(1);
      for (const c of captured) expect(JSON.parse(c.body)).toMatchObject({ instanceId: id, lease: { workerId: expect.any(String), token: expect.any(Number) } });

      const still = await replaysRunNothing(id);
      expect(still.status).toBe("running");
      expect(still.done).toBe(parked.done);

      // The sweeps are what move it on: one hop each, every step once, to the end.
      for (let i = 0; i < 60 && (await row(id)).status !== "completed"; i++) {
        await sweep();
        await new Promise((res) => setTimeout(res, 300));
      }
      const done = await replaysRunNothing(id);
      expect(done).toMatchObject({ status: "completed", done: 4 });
      const steps = await queryRows<{ activity_id: string }>(db.db, sql`SELECT activity_id FROM workflow_history WHERE instance_id = ${id} AND event_type = 'ActivityCompleted' ORDER BY id`);
      expect(steps.map((s) => s.activity_id)).toEqual(["pipeline_step:1", "pipeline_step:2", "pipeline_step:3", "pipeline_step:4"]);
      expect(captured.length).toBeGreaterThanOrEqual(4);

      // Valid traffic flows after: a new pipeline runs to its end.
      const next = await api(runtime.url, "POST", "/workflows/pipeline/instances", { input: { steps: 1 }, instanceId: `${id}-next` });
      expect(next.status).toBe(201);
      for (let i = 0; i < 60 && (await row(`${id}-next`)).status !== "completed"; i++) {
        await sweep();
        await new Promise((res) => setTimeout(res, 300));
      }
      expect((await row(`${id}-next`)).status).toBe("completed");
    });
  });
}

replayFlow("workerd", (vars) => startWrangler(vars, { config: join(ROOT, "test/runtime/fixtures/fetch-worker.toml") }));
replayFlow("Deno", (vars) => startDeno({ ...vars, EDDA_KV: "off" }));
