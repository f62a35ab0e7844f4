/**
 * API report: for every entry in package.json "exports", api-extractor reads
 * the built declarations (dist/, `npm run build` first) and writes
 * etc/api/<entry>.api.md, the package's public surface as reviewers see it.
 *
 *   tsx scripts/api-report.ts          fails (exit 1) when a report differs from the checked-in one
 *   tsx scripts/api-report.ts --update rewrites the reports (then commit them)
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Extractor, ExtractorConfig, ExtractorLogLevel } from "@microsoft/api-extractor";

const ROOT = join(import.meta.dirname, "..");
const update = process.argv.includes("--update");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { exports: Record<string, string | { types: string }> };

/** `./platform/node` → `platform-node`; `.` → `edda-edge`. */
const reportName = (subpath: string) => (subpath === "." ? "edda-edge" : subpath.slice(2).replaceAll("/", "-"));

mkdirSync(join(ROOT, "etc", "api"), { recursive: true });
const changed: string[] = [];
for (const [subpath, target] of Object.entries(pkg.exports)) {
  if (typeof target === "string") continue; // ./package.json
  const name = reportName(subpath);
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: ROOT,
      mainEntryPointFilePath: join(ROOT, target.types),
      compiler: { overrideTsconfig: { compilerOptions: { lib: ["ES2023", "DOM"], types: ["node"], skipLibCheck: true, strict: true } } },
      apiReport: { enabled: true, reportFileName: `${name}.api.md`, reportFolder: join(ROOT, "etc", "api"), reportTempFolder: join(ROOT, "dist", ".api") },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        extractorMessageReporting: { default: { logLevel: ExtractorLogLevel.None }, "ae-forgotten-export": { logLevel: ExtractorLogLevel.None, addToApiReportFile: true } },
        compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Warning } },
        tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
      },
    },
    configObjectFullPath: undefined,
    packageJsonFullPath: join(ROOT, "package.json"),
  });
  const result = Extractor.invoke(config, { localBuild: update, showVerboseMessages: false });
  if (result.apiReportChanged) changed.push(`etc/api/${name}.api.md`);
  if (result.errorCount > 0) changed.push(`${name}: ${result.errorCount} error(s)`);
}
if (changed.length && !update) {
  console.error(`the public API changed: ${changed.join(", ")}\nreview it, then run "npm run api:update" and commit etc/api/`);
  process.exit(1);
}
console.log(update ? `API reports written to etc/api/${changed.length ? ` (changed: ${changed.join(", ")})` : " (no change)"}` : "API reports match");
