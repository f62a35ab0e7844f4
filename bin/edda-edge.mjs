#!/usr/bin/env node
// `npx edda-edge …`: the built CLI (dist/cli.js) in an installed package; in a
// checkout of the repository, the TypeScript sources through tsx.
import { existsSync } from "node:fs";

const sources = new URL("../src/platform/cli.ts", import.meta.url);
let cli;
if (existsSync(sources)) {
  const { register } = await import("tsx/esm/api");
  register();
  cli = await import(sources.href);
} else {
  cli = await import("../dist/cli.js");
}
process.exitCode = await cli.main(process.argv.slice(2), process.env);
