/**
 * Worker bundle size: builds a Worker as `wrangler deploy` would (dry run)
 * and prints the script's raw and gzipped size and its largest contributors,
 * for five Workers: the README's recipe (postgres.js, no MCP, no viewer), the
 * same with `mcp()`, with `viewer()`, on Neon's driver (`driver:
 * neonServerless`), and the
 * repository's example Worker (functions/worker.ts: 18 workflows, MCP and
 * the viewer on, both drivers).
 * Writes bench/results/worker-bundle.json; with --update-docs, the
 * worker-bundle block of docs/deploy-cloudflare.md (test/runtime/worker-bundle.test.ts checks it within 5 %).
 *
 *   npx tsx bench/worker-bundle.ts [--update-docs]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildWorkerBundle, type WorkerBundle, type WorkerVariant } from "../test/support/worker-bundle.ts";
import { wantsDocsUpdate, writeFigureBlock } from "./readme-figures.ts";

const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
const label: Record<WorkerVariant, string> = {
  recipe: "README recipe, no MCP, no viewer",
  "recipe+mcp": "README recipe with mcp()",
  "recipe+viewer": "README recipe with viewer()",
  "recipe+neon": "README recipe on Neon's driver (driver: neonServerless)",
  "recipe+agent": "README recipe with an agent (edda-edge/agent)",
  examples: "functions/worker.ts (examples, MCP and viewer on)",
};
const results: Record<string, { rawBytes: number; gzipBytes: number }> = {};
const bundles: Partial<Record<WorkerVariant, WorkerBundle>> = {};
for (const variant of ["recipe", "recipe+mcp", "recipe+viewer", "recipe+neon", "examples"] as const) {
  const bundle = await buildWorkerBundle(variant);
  results[variant] = { rawBytes: bundle.rawBytes, gzipBytes: bundle.gzipBytes };
  bundles[variant] = bundle;
  console.log(`${label[variant]}: ${kib(bundle.rawBytes)} raw, ${kib(bundle.gzipBytes)} gzipped${bundle.warnings.length ? `, ${bundle.warnings.length} wrangler warnings` : ""}`);
  for (const [name, bytes] of bundle.contributors.slice(0, variant === "recipe" ? 12 : 6)) console.log(`  ${kib(bytes).padStart(11)}  ${name}`);
}
mkdirSync(join(import.meta.dirname, "results"), { recursive: true });
writeFileSync(join(import.meta.dirname, "results", "worker-bundle.json"), JSON.stringify(results, null, 2));

if (wantsDocsUpdate()) {
  const size = (b: WorkerBundle) => `**${Math.round(b.rawBytes / 1024)} KiB raw, ${Math.round(b.gzipBytes / 1024)} KiB gzipped**`;
  const recipe = bundles.recipe!;
  const parts = recipe.contributors.slice(0, 8).map(([name, bytes]) => `${name.startsWith("src/") ? `\`${name}\`` : name} ${Math.round(bytes / 1024)}`);
  writeFigureBlock(
    "worker-bundle",
    `- **Worker bundle** (\`wrangler deploy --dry-run --outdir\`, minified): the Worker recipe of the README's "Install in your project" (postgres.js, no MCP, no viewer) ${size(recipe)}; with \`mcp()\` ${size(bundles["recipe+mcp"]!)}; with \`viewer()\` ${size(bundles["recipe+viewer"]!)}; on Neon's driver (\`driver: neonServerless\`) ${size(bundles["recipe+neon"]!)}. Largest parts (KiB, the recipe): ${parts.join(", ")}.\n`,
  );
}
