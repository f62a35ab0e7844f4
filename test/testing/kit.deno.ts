// The kit's cases under `deno test` (deno test -A --no-lock test/testing/kit.deno.ts),
// run by runtimes.test.ts. PGlite's WASM keeps handles the sanitizers count.
import { kitCases } from "./kit-cases.ts";

declare const Deno: { test(t: { name: string; fn: () => Promise<void>; sanitizeResources?: boolean; sanitizeOps?: boolean }): void };

for (const c of kitCases()) Deno.test({ name: c.name, fn: c.run, sanitizeResources: false, sanitizeOps: false });
