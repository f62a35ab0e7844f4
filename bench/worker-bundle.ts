/**
 * Worker bundle size: builds a Worker as `wrangler deploy` would (dry run)
 * and prints the script's raw and gzipped size and its largest contributors,
 * for three Workers: the README's recipe (no MCP), the same with `mcp()`, and
 * the repository's example Worker (functions/worker.ts: 18 workflows, MCP on).
 * Writes bench/results/worker-bundle.json (read by scripts/figures.ts).
 *
 *   npx tsx bench/worker-bundle.ts
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildWorkerBundle, type WorkerVariant } from "../test/support/worker-bundle.ts";

const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
const label: Record<WorkerVariant, string> = {
  recipe: "README recipe, no MCP",
  "recipe+mcp": "README recipe with mcp()",
  examples: "functions/worker.ts (examples, MCP on)",
};
const results: Record<string, { rawBytes: number; gzipBytes: number }> = {};
for (const variant of ["recipe", "recipe+mcp", "examples"] as const) {
  const bundle = await buildWorkerBundle(variant);
  results[variant] = { rawBytes: bundle.rawBytes, gzipBytes: bundle.gzipBytes };
  console.log(`${label[variant]}: ${kib(bundle.rawBytes)} raw, ${kib(bundle.gzipBytes)} gzipped${bundle.warnings.length ? `, ${bundle.warnings.length} wrangler warnings` : ""}`);
  for (const [name, bytes] of bundle.contributors.slice(0, variant === "recipe" ? 12 : 6)) console.log(`  ${kib(bytes).padStart(11)}  ${name}`);
}
mkdirSync(join(import.meta.dirname, "results"), { recursive: true });
writeFileSync(join(import.meta.dirname, "results", "worker-bundle.json"), JSON.stringify(results, null, 2));
