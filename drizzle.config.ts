import { defineConfig } from "drizzle-kit";

// `npm run db:generate` writes SQL migrations to src/storage/migrations and
// bundles them into migrations.gen.ts so every driver (edge included) can
// apply them without a file system.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/storage/schema.ts",
  out: "./src/storage/migrations",
});
