// The Worker bundle stays lean: built as `wrangler deploy` builds it, it holds
// no PGlite (WASM Postgres), no Node adapter or Node server, and stays within
// a size budget well under the Workers script limits. The README's Worker,
// which does not enable MCP or the viewer, carries none of MCP's code or
// dependencies, none of the viewer's pages, no migrator (a Worker never
// migrates), no zod locale and no Neon driver (it did not import one);
// wrangler builds it without a warning.
import { describe, expect, it } from "vitest";
import { readFigureBlock, statedSizes } from "../../bench/readme-figures.ts";
import { buildWorkerBundle } from "../support/worker-bundle.ts";

const MCP_ONLY = ["@modelcontextprotocol/sdk", "ajv", "ajv-formats", "fast-uri", "zod-to-json-schema"];
/** The migrator and its bundled SQL; the viewer's pages. */
const MIGRATOR = /^src\/storage\/(migrate|migrations\.gen)\.ts$/;
const VIEWER = /^src\/http\/ui\//;

describe("Worker bundles", () => {
  it("the example Worker excludes PGlite and the Node adapter, and fits its size budget", { timeout: 120_000 }, async () => {
    const bundle = await buildWorkerBundle("examples");
    const names = bundle.contributors.map(([name]) => name);
    expect(names).not.toContain("@electric-sql/pglite");
    expect(names).not.toContain("@hono/node-server");
    expect(bundle.inputs.filter((f) => /src\/platform\/node\.ts$|drivers\/pglite\.ts$/.test(f))).toEqual([]);
    expect(bundle.inputs.some((f) => f.endsWith("src/platform/cloudflare.ts"))).toBe(true);
    // The viewer is on here (viewer()), the migrator never is: a Worker does not migrate.
    expect(bundle.inputs).toContain("src/http/ui/index.tsx");
    expect(bundle.inputs.filter((f) => MIGRATOR.test(f))).toEqual([]);
    // With MCP on and both drivers it holds the SDK; measured 1,140 KiB raw / 355 KiB gzipped at 40282bf
    // (bench/worker-bundle.ts). The budget catches an accidental dependency, not the product's own
    // growth; it stays far under the Workers size limit (3 MB compressed on the Free plan, 10 MB Paid:
    // developers.cloudflare.com/workers/platform/limits/#worker-size).
    expect(names).toContain("@modelcontextprotocol/sdk");
    expect(bundle.rawBytes).toBeLessThan(1300 * 1024);
    expect(bundle.gzipBytes).toBeLessThan(400 * 1024);
  });

  it("the README's Worker (no MCP, no viewer) holds no MCP code, no MCP dependency, no viewer page, no migrator, no zod locale, no Neon driver, and builds without warnings", { timeout: 120_000 }, async () => {
    const bundle = await buildWorkerBundle("recipe");
    const names = bundle.contributors.map(([name]) => name);
    expect(names.filter((n) => MCP_ONLY.includes(n))).toEqual([]);
    expect(names).not.toContain("@neondatabase/serverless");
    expect(bundle.inputs.filter((f) => f.endsWith("drivers/neon-serverless.ts"))).toEqual([]);
    expect(names).toContain("postgres");
    expect(bundle.inputs.filter((f) => f.includes("src/http/mcp/") || f.includes("zod/v4/locales/") && !f.endsWith("/en.js"))).toEqual([]);
    expect(bundle.inputs.filter((f) => MIGRATOR.test(f) || VIEWER.test(f))).toEqual([]);
    expect(bundle.inputs.some((f) => f === "src/http/app.ts")).toBe(true);
    expect(bundle.warnings).toEqual([]);
    // Measured 680 KiB raw / 210 KiB gzipped at 86a165f (docs/deploy-cloudflare.md, "Size and cost", from bench/worker-bundle.ts):
    // grown from 610 / 186 KiB with the product's own code (why, deployments, values by reference, encryption), no new
    // dependency. The bound catches a dependency or a whole surface slipping in, far under the Workers size limits.
    expect(bundle.gzipBytes).toBeLessThan(225 * 1024);
  });

  it("the same Worker with viewer() holds the viewer's pages, and still no migrator", { timeout: 120_000 }, async () => {
    const bundle = await buildWorkerBundle("recipe+viewer");
    expect(bundle.inputs).toContain("src/http/ui/index.tsx");
    expect(bundle.inputs).toContain("src/http/ui/surface.ts");
    expect(bundle.inputs.filter((f) => MIGRATOR.test(f))).toEqual([]);
  });

  it("the same Worker with driver: neonServerless holds Neon's driver", { timeout: 120_000 }, async () => {
    const bundle = await buildWorkerBundle("recipe+neon");
    expect(bundle.contributors.map(([n]) => n)).toContain("@neondatabase/serverless");
    expect(bundle.inputs.some((f) => f.endsWith("src/storage/drivers/neon-serverless.ts"))).toBe(true);
    expect(bundle.warnings).toEqual([]);
  });

  it("the same Worker with mcp() holds the MCP SDK; the Workers guide states the four sizes within 5 %", { timeout: 240_000 }, async () => {
    const [without, withMcp, withViewer, neon] = [await buildWorkerBundle("recipe"), await buildWorkerBundle("recipe+mcp"), await buildWorkerBundle("recipe+viewer"), await buildWorkerBundle("recipe+neon")];
    expect(withMcp.contributors.map(([n]) => n)).toContain("@modelcontextprotocol/sdk");
    expect(withMcp.inputs.some((f) => f.endsWith("src/http/mcp/index.ts"))).toBe(true);
    expect(withMcp.rawBytes - without.rawBytes).toBeGreaterThan(100 * 1024);
    // The stated figures (docs/deploy-cloudflare.md, "Size and cost") come from `npx tsx bench/worker-bundle.ts --update-docs`; rerun it when this fails.
    const stated = statedSizes(readFigureBlock("worker-bundle"));
    expect(stated).toHaveLength(4);
    const names = ["recipe", "recipe+mcp", "recipe+viewer", "recipe+neon"];
    for (const [i, measured] of [without, withMcp, withViewer, neon].entries()) {
      for (const key of ["rawBytes", "gzipBytes"] as const) {
        expect(Math.abs(stated[i]![key] - measured[key]) / measured[key], `docs/deploy-cloudflare.md ${key} of ${names[i]}: stated ${stated[i]![key]}, measured ${measured[key]}`).toBeLessThanOrEqual(0.05);
      }
    }
  });
});
