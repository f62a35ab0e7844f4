// The Worker bundle stays lean: built as `wrangler deploy` builds it, it holds
// no PGlite (WASM Postgres), no Node adapter or Node server, and stays within
// a size budget well under the Workers script limits. The README's Worker,
// which does not enable MCP, carries none of MCP's code or dependencies, no
// zod locale and no Neon driver (it did not import one); wrangler builds it
// without a warning.
import { describe, expect, it } from "vitest";
import { readFigureBlock, statedSizes } from "../../bench/readme-figures.ts";
import { buildWorkerBundle } from "../support/worker-bundle.ts";

const MCP_ONLY = ["@modelcontextprotocol/sdk", "ajv", "ajv-formats", "fast-uri", "zod-to-json-schema"];

describe("Worker bundles", () => {
  it("the example Worker excludes PGlite and the Node adapter, and fits its size budget", { timeout: 120_000 }, async () => {
    const bundle = await buildWorkerBundle("examples");
    const names = bundle.contributors.map(([name]) => name);
    expect(names).not.toContain("@electric-sql/pglite");
    expect(names).not.toContain("@hono/node-server");
    expect(bundle.inputs.filter((f) => /src\/platform\/node\.ts$|drivers\/pglite\.ts$/.test(f))).toEqual([]);
    expect(bundle.inputs.some((f) => f.endsWith("src/platform/cloudflare.ts"))).toBe(true);
    // With MCP on and both drivers it holds the SDK; measured 1,109 KiB raw / 340 KiB gzipped (bench/worker-bundle.ts).
    expect(names).toContain("@modelcontextprotocol/sdk");
    expect(bundle.rawBytes).toBeLessThan(1200 * 1024);
    expect(bundle.gzipBytes).toBeLessThan(350 * 1024);
  });

  it("the README's Worker (no MCP) holds no MCP code, no MCP dependency, no zod locale, no Neon driver, and builds without warnings", { timeout: 120_000 }, async () => {
    const bundle = await buildWorkerBundle("recipe");
    const names = bundle.contributors.map(([name]) => name);
    expect(names.filter((n) => MCP_ONLY.includes(n))).toEqual([]);
    expect(names).not.toContain("@neondatabase/serverless");
    expect(bundle.inputs.filter((f) => f.endsWith("drivers/neon-serverless.ts"))).toEqual([]);
    expect(names).toContain("postgres");
    expect(bundle.inputs.filter((f) => f.includes("src/http/mcp/") || f.includes("zod/v4/locales/") && !f.endsWith("/en.js"))).toEqual([]);
    expect(bundle.warnings).toEqual([]);
    // Measured 705 KiB raw / 214 KiB gzipped (README, "Size and cost"); 190 KiB at c8ae49d, before later features grew it.
    expect(bundle.gzipBytes).toBeLessThan(230 * 1024);
  });

  it("the same Worker with driver: neonServerless holds Neon's driver", { timeout: 120_000 }, async () => {
    const bundle = await buildWorkerBundle("recipe+neon");
    expect(bundle.contributors.map(([n]) => n)).toContain("@neondatabase/serverless");
    expect(bundle.inputs.some((f) => f.endsWith("src/storage/drivers/neon-serverless.ts"))).toBe(true);
    expect(bundle.warnings).toEqual([]);
  });

  it("the same Worker with mcp() holds the MCP SDK; the README states the three sizes within 5 %", { timeout: 180_000 }, async () => {
    const [without, withMcp, neon] = [await buildWorkerBundle("recipe"), await buildWorkerBundle("recipe+mcp"), await buildWorkerBundle("recipe+neon")];
    expect(withMcp.contributors.map(([n]) => n)).toContain("@modelcontextprotocol/sdk");
    expect(withMcp.inputs.some((f) => f.endsWith("src/http/mcp/index.ts"))).toBe(true);
    expect(withMcp.rawBytes - without.rawBytes).toBeGreaterThan(100 * 1024);
    // The README's figures come from `npx tsx bench/worker-bundle.ts --update-readme`; rerun it when this fails.
    const stated = statedSizes(readFigureBlock("worker-bundle"));
    expect(stated).toHaveLength(3);
    const names = ["recipe", "recipe+mcp", "recipe+neon"];
    for (const [i, measured] of [without, withMcp, neon].entries()) {
      for (const key of ["rawBytes", "gzipBytes"] as const) {
        expect(Math.abs(stated[i]![key] - measured[key]) / measured[key], `README ${key} of ${names[i]}: stated ${stated[i]![key]}, measured ${measured[key]}`).toBeLessThanOrEqual(0.05);
      }
    }
  });
});
