// The Deno guide's "Locally" block (docs/deploy-deno.md) run as written (readme-walk.ts): `deno run -A
// functions/deno.ts` with the environment its line sets (only the database
// URL and the port are the test's), then its curl lines, which must succeed
// with the token that line gives. Its `npx deno check functions/deno.ts` runs
// in test/runtime/deno.test.ts already, so it is left out here.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDeno, type Server } from "../runtime/processes.ts";
import { freshPostgres } from "../support/engine.ts";
import { readSteps } from "./readme-claims.ts";
import { ROOT, Shell, walk } from "./readme-walk.ts";

const guide = await readFile(join(ROOT, "docs", "deploy-deno.md"), "utf8");
const steps = readSteps(guide, "## Locally");
const run = steps.find((s) => /\bnpx deno run -A functions\/deno\.ts$/.test(s.command));
const env = Object.fromEntries([...(run?.command ?? "").matchAll(/(?:^|\s)([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));

let deno: Server;
let shell: Shell;

beforeAll(async () => {
  const { url } = await freshPostgres("readme_deno_local");
  deno = await startDeno({ ...env, DATABASE_URL: url }, { ready: () => true });
  shell = Shell.start({});
}, 180_000);

afterAll(async () => {
  shell?.close();
  await deno?.stop();
});

describe("docs/deploy-deno.md: Deno locally", () => {
  it("reads the deno run line and its environment", () => {
    expect(run, "the block has its deno run line").toBeDefined();
    expect(Object.keys(env).sort()).toEqual(["DATABASE_URL", "EDDA_API_TOKEN", "EDDA_SECRET", "PORT"]);
  });

  it("the curl lines answer with the token the run line sets", { timeout: 120_000 }, async () => {
    const curls = steps.filter((s) => /^curl /.test(s.command));
    expect(curls.length).toBeGreaterThan(0);
    await walk(curls, { shell, base: deno.url, fill: (step) => Promise.resolve(step.command.replace(new RegExp(`\\blocalhost:${env.PORT}\\b`, "g"), `127.0.0.1:${deno.port}`)) });
  });
});
