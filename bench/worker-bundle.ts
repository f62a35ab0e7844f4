/**
 * Worker bundle size: builds functions/worker.ts as `wrangler deploy` would
 * (dry run) and prints the script's raw and gzipped size and its largest
 * contributors. `npx tsx bench/worker-bundle.ts`
 */
import { buildWorkerBundle } from "../test/support/worker-bundle.ts";

const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
const bundle = await buildWorkerBundle();
console.log(`worker.js: ${kib(bundle.rawBytes)} raw, ${kib(bundle.gzipBytes)} gzipped`);
for (const [name, bytes] of bundle.contributors.slice(0, 12)) console.log(`  ${kib(bytes).padStart(11)}  ${name}`);
