/**
 * `npx tsx scripts/wait-protocol-figures.ts [--time]`
 *
 * The figures issue 35 ("one wait protocol down to the SQL") is judged by, read
 * from the tree as it stands:
 *   - in how many source files each waiting status string appears (src/, the
 *     generated migrations — migrations.gen.ts and migrations/ — left out);
 *   - how many source files write `status = 'running'` and how many hold an
 *     `INSERT INTO workflow_history`;
 *   - the unit tier's share of the test files (vitest's own list of the unit
 *     project against every test/**\/*.test.ts), and with --time how long
 *     `npm run test:unit` takes and whether it passed.
 * Prints one JSON object, so a before and an after can be compared.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { INSTANCE_STATUSES } from "../src/core/model.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

function walk(dir: string, keep: (path: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : walk(path, keep);
    return keep(path) ? [relative(root, path)] : [];
  });
}

const generated = (path: string) => path.endsWith("migrations.gen.ts") || path.includes("/storage/migrations/");
const sources = walk(join(root, "src"), (p) => /\.tsx?$/.test(p) && !generated(p)).map((path) => ({ path, text: readFileSync(join(root, path), "utf8") }));
const filesWith = (pattern: RegExp) => sources.filter((s) => pattern.test(s.text)).map((s) => s.path);

const waitStatuses = INSTANCE_STATUSES.filter((s) => s.startsWith("waiting_for_"));
const statusFiles: Record<string, string[]> = Object.fromEntries(waitStatuses.map((s) => [s, filesWith(new RegExp(`\\b${s}\\b`))]));
const runningFiles = filesWith(/status\s*=\s*'running'/);
const historyInsertFiles = filesWith(/INSERT INTO workflow_history\b(?!_)/);

const testFiles = walk(join(root, "test"), (p) => p.endsWith(".test.ts"));
const unitFiles = execFileSync("npx", ["vitest", "list", "--project", "unit", "--filesOnly"], { cwd: root, encoding: "utf8" })
  .split("\n")
  .filter((l) => l.startsWith("[unit] "));

let unitSeconds: number | null = null;
let unitPassed: boolean | null = null;
if (process.argv.includes("--time")) {
  const t0 = performance.now();
  try {
    execFileSync("npm", ["run", "--silent", "test:unit"], { cwd: root, stdio: "ignore" });
    unitPassed = true;
  } catch {
    unitPassed = false;
  }
  unitSeconds = Math.round((performance.now() - t0) / 100) / 10;
}

console.log(
  JSON.stringify(
    {
      commit: execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).trim(),
      waitStatusFiles: Object.fromEntries(Object.entries(statusFiles).map(([s, files]) => [s, files.length])),
      maxWaitStatusFiles: Math.max(...Object.values(statusFiles).map((f) => f.length)),
      statusRunningFiles: runningFiles.length,
      historyInsertFiles: historyInsertFiles.length,
      testFiles: testFiles.length,
      unitTestFiles: unitFiles.length,
      unitShare: Math.round((unitFiles.length / testFiles.length) * 1000) / 10,
      unitSeconds,
      unitPassed,
      detail: { statusFiles, runningFiles, historyInsertFiles },
    },
    null,
    2,
  ),
);
