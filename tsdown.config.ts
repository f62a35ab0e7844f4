// The published build: ESM JavaScript, bundled .d.ts and source maps for every
// public entry (package.json "exports"). Each entry is its own module graph, so
// importing `edda-edge/platform/cloudflare` never reaches PGlite or the Node
// server; code shared by several entries lands in shared chunks. Dependencies
// and peer dependencies stay external: the user's bundler (wrangler, Deno)
// resolves them. The repository itself runs the TypeScript sources.
import { defineConfig } from "tsdown";

export default defineConfig({
  entry: {
    index: "src/index.ts",
    "platform/node": "src/platform/node.ts",
    "platform/cloudflare": "src/platform/cloudflare.ts",
    "platform/deno": "src/platform/deno.ts",
    "drivers/pglite": "src/storage/drivers/pglite.ts",
    "drivers/postgres-js": "src/storage/drivers/postgres-js.ts",
    "drivers/neon-serverless": "src/storage/drivers/neon-serverless.ts",
    client: "src/client/index.ts",
    mcp: "src/mcp.ts",
    viewer: "src/viewer.ts",
    testing: "src/testing/index.ts",
    agent: "src/agent/index.ts",
    cli: "src/platform/cli.ts",
  },
  format: "esm",
  platform: "neutral",
  // Runtime built-ins stay imports (Workers with nodejs_compat, Deno and Node all provide node:*).
  external: [/^node:/],
  target: "es2022",
  dts: true,
  sourcemap: true,
  clean: true,
  outDir: "dist",
  // No JSDoc in the JavaScript (the .d.ts files keep it): the viewer's
  // `/** @jsxImportSource hono/jsx */` pragmas, already compiled away, made
  // esbuild (wrangler) warn in every consumer's build.
  outputOptions: { comments: { legal: true, annotation: true, jsdoc: false } },
});
