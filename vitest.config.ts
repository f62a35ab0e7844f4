// Vitest config: every test/**/*.test.ts runs in forked workers against one
// shared Postgres + Neon proxy started by test/global-setup.ts.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
