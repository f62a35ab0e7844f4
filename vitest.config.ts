// Vitest config: the tests in four tiers (projects), by what they need.
//   unit     no database, no other runtime (and any *.unit.test.ts): pure core,
//            the step decision and the wait table, the dispatchers, the HTTP
//            routes' refusals on the real app over noDatabase()
//            (test/support/no-database.ts), the OpenAPI document, the viewer's
//            timeline and login gate, the client, platform options. No global
//            set-up, so a test that needs Postgres fails here at once (nothing
//            is provided).
//   storage  the storage contract on every driver, migrations, the harness.
//   engine   the engine, channels, HTTP API, viewer, MCP and client in-process,
//            on real Postgres or PGlite (every test file not listed elsewhere).
//   runtime  real processes and other runtimes: wrangler (workerd), Deno,
//            Chromium, the packed package, the CLI, the chaos run, the test
//            kit under node --test and deno test.
// storage, engine and runtime get one Postgres server + Neon proxy per run,
// started by test/global-setup.ts. `npm test` runs the tiers in this order and
// stops at the first that fails; `npm run test:<tier>` runs one.
import { configDefaults, defineConfig } from "vitest/config";

export const TIERS = {
  unit: ["test/**/*.unit.test.ts", "test/core/**/*.test.ts", "test/platform/**/*.test.ts", "test/client/types.test.ts", "test/ui/timeline.test.ts"],
  storage: ["test/storage/**/*.test.ts", "test/harness.test.ts", "test/cli/migrate.test.ts"],
  runtime: [
    "test/runtime/**/*.test.ts",
    "test/package/**/*.test.ts",
    "test/chaos/**/*.test.ts",
    "test/mcp/{deno,node,workerd}.test.ts",
    "test/client/runtimes.test.ts",
    "test/client/*.browser.test.ts",
    "test/ui/runtimes.test.ts",
    "test/ui/*.browser.test.ts",
    "test/dispatch/limits.test.ts",
    "test/cli/commands.test.ts",
    "test/cli/defaults.test.ts",
    "test/testing/runtimes.test.ts",
  ],
};

const withDatabase = { globalSetup: ["test/global-setup.ts"] };

export default defineConfig({
  test: {
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 120_000,
    projects: [
      // Unit tests are pure, so the files of one worker share its loaded modules
      // (isolate: false: about a third less CPU); a unit test must not leave
      // global state behind (fake timers, globals, neonConfig).
      { extends: true, test: { name: "unit", include: TIERS.unit, isolate: false } },
      // Each tier excludes the ones above it, and engine takes the rest: every file runs in exactly one.
      { extends: true, test: { name: "storage", include: TIERS.storage, exclude: [...configDefaults.exclude, ...TIERS.unit], ...withDatabase } },
      {
        extends: true,
        test: { name: "engine", include: ["test/**/*.test.ts"], exclude: [...configDefaults.exclude, ...TIERS.unit, ...TIERS.storage, ...TIERS.runtime], ...withDatabase },
      },
      { extends: true, test: { name: "runtime", include: TIERS.runtime, exclude: [...configDefaults.exclude, ...TIERS.unit, ...TIERS.storage], ...withDatabase } },
    ],
  },
});
