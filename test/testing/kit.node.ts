// The kit's cases under `node --test` (node --import tsx --test test/testing/kit.node.ts),
// run by runtimes.test.ts.
import { test } from "node:test";
import { kitCases } from "./kit-cases.ts";

for (const c of kitCases()) void test(c.name, c.run);
