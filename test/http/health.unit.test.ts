// The probes when the database cannot be reached (here: there is none, and
// every use of it fails): /healthz answers 503 degraded/unreachable and
// /readyz 503 failing, without a token and without a stack or an SQL text in
// the answer; a flood of /readyz calls asks the database at most once per
// second (one outcome answers for READY_CACHE_MS), so an unauthenticated
// probe is no way to make the database work at will. The working and the
// hanging database: health.test.ts on PGlite and real Postgres.
import { afterAll, describe, expect, it, vi } from "vitest";
import { pipeline } from "../../functions/workflows/pipeline.ts";
import { appWithoutDatabase } from "../support/no-database.ts";

const t = appWithoutDatabase({ workflows: [pipeline], apiToken: "health-token" });
afterAll(() => t.edda.close());

describe("probes over an unreachable database", () => {
  it("/healthz: 503 degraded, database unreachable — no token needed, nothing else said", async () => {
    const r = await t.request("/healthz");
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({ status: "degraded", database: "unreachable" });
    expect(t.touched.length).toBeGreaterThan(0);
  });

  it("/readyz: 503 failing, logged as one line naming the error class; 50 calls ask the database once a second at most", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      t.touched.length = 0;
      const answers = [];
      const t0 = Date.now();
      for (let i = 0; i < 50; i++) answers.push(await t.request("/readyz"));
      const seconds = Math.floor((Date.now() - t0) / 1000);
      for (const r of answers) {
        expect(r.status).toBe(503);
        expect(await r.json()).toEqual({ status: "not_ready", database: "failing" });
      }
      // Once, and once more for each second the loop took on a loaded machine.
      expect(t.touched.length).toBeGreaterThanOrEqual(1);
      expect(t.touched.length).toBeLessThanOrEqual(1 + seconds);
      expect(new Set(logged.mock.calls.map((c) => String(c[0])))).toEqual(new Set(["edda: readiness check failed: NoDatabaseError"]));
    } finally {
      logged.mockRestore();
    }
  });
});
