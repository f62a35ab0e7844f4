#!/usr/bin/env node
// `npx edda-edge migrate`: runs the TypeScript CLI (src/platform/cli.ts) through tsx's loader.
import { register } from "tsx/esm/api";

register();
await import("../src/platform/cli.ts");
