// The Worker bundle stays lean: built as `wrangler deploy` builds it, it holds
// no PGlite (WASM Postgres), no Node adapter or Node server, and stays within
// a size budget well under the Workers script limits.
import { expect, it } from "vitest";
import { buildWorkerBundle } from "../support/worker-bundle.ts";

it("the Worker bundle excludes PGlite and the Node adapter, and fits its size budget", { timeout: 120_000 }, async () => {
  const bundle = await buildWorkerBundle();
  const names = bundle.contributors.map(([name]) => name);
  expect(names).not.toContain("@electric-sql/pglite");
  expect(names).not.toContain("@hono/node-server");
  expect(bundle.inputs.filter((f) => /src\/platform\/node\.ts$|drivers\/pglite\.ts$/.test(f))).toEqual([]);
  expect(bundle.inputs.some((f) => f.endsWith("src/platform/cloudflare.ts"))).toBe(true);
  // Measured 968 KiB raw / 253 KiB gzipped (zod alone is ~460 KiB); the budget leaves room, not slack for a WASM engine.
  expect(bundle.rawBytes).toBeLessThan(1400 * 1024);
  expect(bundle.gzipBytes).toBeLessThan(400 * 1024);
});
