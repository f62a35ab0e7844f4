// Payloads in real workerd (`wrangler dev`, functions/worker.ts, postgres.js):
// with EDDA_ENCRYPTION_KEY set, the example large_report returns a 1 MiB
// report and its note through the API, the report goes by reference
// (workflow_payloads), and no row of the database holds the note in the clear —
// Web Crypto's AES-GCM and SHA-256 as workerd runs them.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { toBase64 } from "../../src/core/serialization.ts";
import { queryRows } from "../../src/storage/database.ts";
import { api, waitForStatus } from "./processes.ts";
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
