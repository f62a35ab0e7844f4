// `npm start`: the example app (functions/node.ts) built by esbuild into one
// JavaScript file under .data/ (a fraction of a second) and run in this very
// process: no TypeScript loader at run time, no second Node process beside
// npm's. Packages stay in node_modules (imported, not bundled), so PGlite and
// the MCP SDK still load only when used. Stack traces point at the sources.
import { build, stop } from "esbuild";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const root = join(import.meta.dirname, "..");
const outfile = join(root, ".data", "build", "node.mjs");
await build({
  entryPoints: [join(root, "functions", "node.ts")],
  outfile,
  bundle: true,
  packages: "external",
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: true,
  tsconfig: join(root, "tsconfig.json"),
  logLevel: "warning",
});
// esbuild's JS API keeps its Go service process alive (unref'd) for further builds: ~45 MiB resident beside the
// app for as long as it runs. One build is all this process makes.
await stop();
process.setSourceMapsEnabled(true);
await import(pathToFileURL(outfile).href);
