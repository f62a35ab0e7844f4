// Payloads in real workerd (`wrangler dev`, functions/worker.ts, postgres.js):
// with EDDA_ENCRYPTION_KEY set, the example large_report returns a 1 MiB
// report and its note through the API, the report goes by reference
// (workflow_payloads), and no row of the database holds the note in the clear —
// Web Crypto's AES-GCM and SHA-256 as workerd runs them. With an R2 bucket
// bound (EDDA_VALUES, simulated by wrangler dev), the values go there instead
// of workflow_payloads and are read back through the API (the store itself,
// purge and fork included, is tested on Miniflare's R2 in test/engine/r2-values.test.ts).
import { sql } from "drizzle-orm";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toBase64 } from "../../src/core/serialization.ts";
import { queryRows } from "../../src/storage/database.ts";
import type { Database } from "../../src/storage/database.ts";
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { freshDatabase } from "../support/db.ts";
import { api, ROOT, startWrangler, waitForStatus, type Server } from "./processes.ts";
import { startWorkerWith } from "./worker-setup.ts";

const CANARY = "canary-workerd-3c7e";
const KEY = toBase64(crypto.getRandomValues(new Uint8Array(32)));

describe("Worker on workerd: large values and encryption at rest", { timeout: 60_000 }, () => {
  const w = startWorkerWith("workerd_payloads", () => ({ EDDA_SECRET: "workerd-secret", EDDA_ENCRYPTION_KEY: KEY }));

  it("large_report: a 1 MiB report by reference and an encrypted note, plain through the API, absent from the rows", async () => {
    const r = await api<{ instanceId: string }>(w.worker.url, "POST", "/workflows/large_report/instances", { instanceId: "wd-large", input: { sizeKiB: 1024, note: CANARY } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const done = await waitForStatus(w.worker.url, "wd-large", ["completed", "failed"], 40_000);
    expect(done.status).toBe("completed");
    const output = done.output as { note: string; bytes: number; report: string };
    expect(output.note).toBe(CANARY);
    expect(output.report.length).toBe(1024 * 1024);
    const [rows] = await queryRows<{ stored: string; values: number | string; largest: number | string }>(
      w.db.db,
      sql`SELECT (SELECT string_agg(coalesce(event_data, ''), '') FROM workflow_history WHERE instance_id = 'wd-large')
                 || (SELECT input_data || coalesce(output_data, '') FROM workflow_instances WHERE instance_id = 'wd-large')
                 || (SELECT coalesce(string_agg(data, ''), '') FROM workflow_payloads WHERE instance_id = 'wd-large') AS stored,
                 (SELECT count(*) FROM workflow_payloads WHERE instance_id = 'wd-large') AS values,
                 (SELECT max(octet_length(event_data)) FROM workflow_history WHERE instance_id = 'wd-large') AS largest`,
    );
    expect(rows!.stored).toContain('{"$enc":"');
    expect(rows!.stored).not.toContain(CANARY);
    expect(Number(rows!.values)).toBe(2);
    expect(Number(rows!.largest)).toBeLessThanOrEqual(64 * 1024);
  });
});

describe("Worker on workerd: values by reference in an R2 bucket", { timeout: 60_000 }, () => {
  let db: Database;
  let worker: Server;
  beforeAll(async () => {
    const url = await freshDatabase("workerd_r2");
    db = createPostgresJsDatabase({ url, max: 2 });
    await migrate(db.db);
    worker = await startWrangler(
      { DATABASE_URL: url, EDDA_ALLOW_UNAUTHENTICATED: "1", EDDA_SECRET: "workerd-secret", EDDA_ENCRYPTION_KEY: KEY },
      { config: join(ROOT, "test", "runtime", "fixtures", "r2-worker.toml") },
    );
  }, 90_000);
  afterAll(async () => {
    await worker?.stop();
    await db?.close();
  });

  it("large_report: the 1 MiB report is kept in the bucket (no workflow_payloads row), answered whole through the API, history rows small", async () => {
    const r = await api<{ instanceId: string }>(worker.url, "POST", "/workflows/large_report/instances", { instanceId: "wd-r2", input: { sizeKiB: 1024, note: CANARY } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const done = await waitForStatus(worker.url, "wd-r2", ["completed", "failed"], 40_000);
    expect(done.status).toBe("completed");
    const output = done.output as { note: string; report: string };
    expect(output.note).toBe(CANARY);
    expect(output.report.length).toBe(1024 * 1024);
    const [rows] = await queryRows<{ values: number | string; largest: number | string; refs: number | string }>(
      db.db,
      sql`SELECT (SELECT count(*) FROM workflow_payloads) AS values,
                 (SELECT max(octet_length(event_data)) FROM workflow_history WHERE instance_id = 'wd-r2') AS largest,
                 (SELECT count(*) FROM workflow_history WHERE instance_id = 'wd-r2' AND event_data LIKE '{"$ref":"%') AS refs`,
    );
    expect(Number(rows!.values)).toBe(0);
    expect(Number(rows!.refs)).toBe(1);
    expect(Number(rows!.largest)).toBeLessThanOrEqual(64 * 1024);
  });
});
