// The Workers guide's "Locally, against any Postgres" walk-through
// (docs/deploy-cloudflare.md), run as written (readme-walk.ts): the migrate line through bash, `wrangler dev`
// with exactly the --var flags the guide gives (only the database URL is the
// test's), then every curl line against it with its → claims checked. A
// command of the guide that leaves the Worker refusing to serve (its API answers
// 503 until EDDA_API_TOKEN or EDDA_ALLOW_UNAUTHENTICATED is set) fails here.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWrangler, type Server } from "../runtime/processes.ts";
import { freshPostgres } from "../support/engine.ts";
import { readSteps } from "./readme-claims.ts";
import { ROOT, Shell, walk } from "./readme-walk.ts";

const guide = await readFile(join(ROOT, "docs", "deploy-cloudflare.md"), "utf8");
const steps = readSteps(guide, "## Locally, against any Postgres");
const dev = steps.find((s) => /^npx wrangler dev /.test(s.command));
const vars = Object.fromEntries([...(dev?.command ?? "").matchAll(/--var (\w+):(\S+)/g)].map((m) => [m[1]!, m[2]!]));
const GUIDE_DB = /DATABASE_URL=(\S+) npm run migrate/.exec(steps[0]?.command ?? "")?.[1];

let worker: Server;
let shell: Shell;
let url: string;

beforeAll(async () => {
  url = (await freshPostgres("readme_workers_local")).url;
  // Up once it answers at all: a Worker refusing to serve should fail the walk with its 503, not a start-up timeout.
  worker = await startWrangler({ ...vars, DATABASE_URL: url }, { ready: () => true });
  shell = Shell.start({});
}, 180_000);

afterAll(async () => {
  shell?.close();
  await worker?.stop();
});

describe("docs/deploy-cloudflare.md: the Worker locally", () => {
  it("reads the wrangler dev line and the database the walk-through uses", () => {
    expect(dev, "the block has its npx wrangler dev line").toBeDefined();
    expect(vars.DATABASE_URL).toBe(GUIDE_DB);
    expect(Object.keys(vars)).toContain("EDDA_SECRET");
  });

  it("every command answers as its comments say", { timeout: 300_000 }, async () => {
    await walk(
      steps.filter((s) => s !== dev),
      {
        shell,
        base: worker.url,
        fill: (step) => Promise.resolve(step.command.replaceAll(GUIDE_DB!, url).replace(/\blocalhost:8787\b/g, `127.0.0.1:${worker.port}`)),
      },
    );
  });
});
