// The kit's cases (kit-cases.ts) in the other two test runners a team may
// use: `node --test` and `deno test` (the `deno` npm package), each a real
// process running the repository's sources on in-memory PGlite. Every case
// must pass in both; the vitest run of the same cases is kit.test.ts.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { ROOT } from "../runtime/processes.ts";
import { kitCases } from "./kit-cases.ts";

const exec = promisify(execFile);
const CASES = kitCases().length;
const opts = { cwd: ROOT, timeout: 900_000, maxBuffer: 32 * 1024 * 1024, env: { ...process.env, NO_COLOR: "1" } };

it("node --test runs every kit case and all pass", { timeout: 900_000 }, async () => {
  const r = await exec(process.execPath, ["--import", "tsx", "--test", "test/testing/kit.node.ts"], opts);
  expect(r.stdout).toMatch(new RegExp(`^# pass ${CASES}$`, "m"));
  expect(r.stdout).toMatch(/^# fail 0$/m);
});

it("deno test runs every kit case and all pass", { timeout: 900_000 }, async () => {
  const r = await exec(join(ROOT, "node_modules", ".bin", "deno"), ["test", "-A", "--no-lock", "test/testing/kit.deno.ts"], opts);
  expect(r.stdout).toMatch(new RegExp(`ok \\| ${CASES} passed \\| 0 failed`));
});
