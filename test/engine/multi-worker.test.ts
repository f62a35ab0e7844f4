// Three Node servers, each with its own database connections, share one real
// Postgres; follow-up steps travel between them as signed HTTP requests
// (A → B → C → A). 50 five-step workflows started at once must all complete
// with every transactional activity's row written exactly once.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { activity, workflow } from "../../src/index.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { queryRows, type Database } from "../../src/storage/database.ts";
import { freshDatabase } from "../support/db.ts";
import { freePort } from "../support/postgres-cluster.ts";

const writeStep = activity("mw_write_step", async (ctx, n: number) => {
  await ctx.tx.execute(sql`INSERT INTO mw_rows (instance_id, n) VALUES (${ctx.instanceId}, ${n})`);
  return n;
});
const rowsPipeline = workflow("mw_pipeline", async (ctx, steps: number) => {
  for (let i = 1; i <= steps; i++) await writeStep(ctx, i);
  return { completed: steps };
});

let servers: NodeServer[] = [];
let admin: Database;

beforeAll(async () => {
  const url = await freshDatabase("multiworker");
  admin = createPostgresJsDatabase({ url, max: 2 });
  await migrate(admin.db);
  await admin.db.execute(sql`CREATE TABLE mw_rows (id serial PRIMARY KEY, instance_id text NOT NULL, n int NOT NULL)`);
  const ports = [await freePort(), await freePort(), await freePort()];
  servers = await Promise.all(
    ports.map((port, i) =>
      serveNode({
        workflows: [rowsPipeline],
        port,
        env: { DATABASE_URL: url, EDDA_SECRET: "mw-secret", EDDA_SERVICE_NAME: `worker-${i}` },
        dispatcher: { http: { baseUrl: `http://127.0.0.1:${ports[(i + 1) % 3]}` } },
        sweepIntervalMs: 1000,
      }),
    ),
  );
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await admin?.close();
});

it("50 pipelines of 5 steps across 3 workers: all complete, each row exactly once", { timeout: 90_000 }, async () => {
  const started = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      fetch(`http://127.0.0.1:${servers[i % 3]!.port}/workflows/mw_pipeline/instances`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input: 5 }),
      }).then(async (r) => {
        expect(r.status).toBe(201);
        return ((await r.json()) as { instanceId: string }).instanceId;
      }),
    ),
  );
  const deadline = Date.now() + 60_000;
  let done = 0;
  while (Date.now() < deadline) {
    const [r] = await queryRows<{ n: number }>(admin.db, sql`SELECT count(*)::int AS n FROM workflow_instances WHERE workflow_name = 'mw_pipeline' AND status = 'completed'`);
    done = Number(r!.n);
    if (done === 50) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  if (done !== 50) console.log(await queryRows(admin.db, sql`SELECT status, locked_by, error_data, current_activity_id, count(*) FROM workflow_instances GROUP BY 1,2,3,4`));
  expect(done).toBe(50);
  const [counts] = await queryRows<{ total: number; distinct_pairs: number }>(
    admin.db,
    sql`SELECT count(*)::int AS total, count(DISTINCT (instance_id, n))::int AS distinct_pairs FROM mw_rows`,
  );
  expect(counts).toEqual({ total: 250, distinct_pairs: 250 });
  const perInstance = await queryRows<{ instance_id: string; n: number }>(admin.db, sql`SELECT instance_id, count(*)::int AS n FROM mw_rows GROUP BY instance_id`);
  expect(perInstance.map((r) => r.instance_id).sort()).toEqual([...started].sort());
  expect(perInstance.every((r) => Number(r.n) === 5)).toBe(true);
  // the steps really moved between workers
  const owners = await queryRows<{ n: number }>(admin.db, sql`SELECT count(DISTINCT owner_service)::int AS n FROM workflow_instances`);
  expect(Number(owners[0]!.n)).toBe(3);
  const held = await queryRows(admin.db, sql`SELECT 1 FROM workflow_instances WHERE locked_by IS NOT NULL`);
  expect(held).toEqual([]);
});
