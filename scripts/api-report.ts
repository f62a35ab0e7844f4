/**
 * API report: for every entry in package.json "exports", api-extractor reads
 * the built declarations (dist/, `npm run build` first) and writes
 * etc/api/<entry>.api.md, the package's public surface as reviewers see it.
 *
 *   tsx scripts/api-report.ts          fails (exit 1) when a report differs from the checked-in one
 *   tsx scripts/api-report.ts --update rewrites the reports (then commit them)
 *
 * Every type a public declaration mentions must be importable: from the same
 * entry, or from the root entry `edda-edge` (where the shared types live, so
 * `edda-edge/platform/node` mentions `EddaOptions` without restating it). Any
 * other "forgotten export" fails the script, update or not.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Extractor, ExtractorConfig, ExtractorLogLevel } from "@microsoft/api-extractor";
import ts from "typescript";

const ROOT = join(import.meta.dirname, "..");
const update = process.argv.includes("--update");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { exports: Record<string, string | { types: string }> };

/** `./platform/node` → `platform-node`; `.` → `edda-edge`. */
const reportName = (subpath: string) => (subpath === "." ? "edda-edge" : subpath.slice(2).replaceAll("/", "-"));

/** The names the root entry's declarations export. */
function rootExports(): Set<string> {
  const file = join(ROOT, (pkg.exports["."] as { types: string }).types);
  const program = ts.createProgram([file], { skipLibCheck: true, noEmit: true });
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
  return new Set(checker.getExportsOfModule(module).map((s) => s.name));
}
const sharedNames = rootExports();

mkdirSync(join(ROOT, "etc", "api"), { recursive: true });
const changed: string[] = [];
const unexported: string[] = [];
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
        extractorMessageReporting: { default: { logLevel: ExtractorLogLevel.None }, "ae-forgotten-export": { logLevel: ExtractorLogLevel.Warning, addToApiReportFile: false } },
        compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Warning } },
        tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
      },
    },
    configObjectFullPath: undefined,
    packageJsonFullPath: join(ROOT, "package.json"),
  });
  const result = Extractor.invoke(config, {
    localBuild: update,
    showVerboseMessages: false,
    messageCallback: (message) => {
      if (message.messageId !== "ae-forgotten-export") return;
      message.handled = true;
      const symbol = /The symbol "([^"]+)"/.exec(message.text)?.[1] ?? message.text;
      if (subpath === "." || !sharedNames.has(symbol)) unexported.push(`${name}: ${symbol} (${message.sourceFilePath ?? "?"}:${message.sourceFileLine ?? "?"})`);
    },
  });
  if (result.apiReportChanged) changed.push(`etc/api/${name}.api.md`);
  if (result.errorCount > 0) changed.push(`${name}: ${result.errorCount} error(s)`);
}
if (unexported.length) {
  console.error(`public declarations mention types that no entry exports (export them, or keep them out of the public API):\n  ${unexported.join("\n  ")}`);
  process.exit(1);
}
if (changed.length && !update) {
  console.error(`the public API changed: ${changed.join(", ")}\nreview it, then run "npm run api:update" and commit etc/api/`);
  process.exit(1);
}
console.log(update ? `API reports written to etc/api/${changed.length ? ` (changed: ${changed.join(", ")})` : " (no change)"}` : "API reports match");
