// The "Try it" walk-throughs, run as written (readme-walk.ts): the README's
// short one and the one each guide (docs/*.md) ends with. Every shell line of
// a walk-through's sh block goes through a real bash and curl to a real
// server serving the example workflows as `npm start` does (functions/node.ts),
// one server and one fresh database per document, and every claim its →
// comments make is checked (test/package/readme-claims.ts): the status and
// body of each answer, "<id> completes with {output}", the SSE lines, the
// CLI's output. A server's settings are the ones the document's comments tell
// the reader to start it with (EDDA_SECRET=dev …); only the ports, the
// database URL and the `<…>` placeholders are filled in.
import { readdirSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webhooks, workflows } from "../../functions/workflows/index.ts";
import { mcp } from "../../src/mcp.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { freshPostgres } from "../support/engine.ts";
import { freePort } from "../support/postgres-cluster.ts";
import { readSteps, type Step } from "./readme-claims.ts";
import { eventually, ROOT, Shell, walk } from "./readme-walk.ts";

const HEADING = "## Try it";

interface WalkThrough {
  file: string;
  steps: Step[];
  /** What the section's comments say to start the server with, e.g. "start the server with EDDA_WEBHOOK_STRIPE_SECRET=whsec_test". */
  settings: Record<string, string>;
}

async function walkThrough(file: string): Promise<WalkThrough | null> {
  const text = await readFile(join(ROOT, file), "utf8");
  const at = text.indexOf(`\n${HEADING}`);
  if (at < 0) return null;
  const end = text.indexOf("\n## ", at + 1);
  const section = text.slice(at, end < 0 ? undefined : end);
  const settings = Object.fromEntries(
    section
      .split("\n")
      .filter((l) => l.trimStart().startsWith("#"))
      .flatMap((l) => [...l.matchAll(/\b(EDDA_[A-Z_]+)=([^\s;,)]+)/g)].map((m) => [m[1]!, m[2]!] as const)),
  );
  return { file, steps: readSteps(section, HEADING), settings };
}

const guides = readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`);
const walkThroughs = (await Promise.all(["README.md", ...guides].map(walkThrough))).filter((w): w is WalkThrough => w !== null);

describe("Try it: the README and the guides", () => {
  it("the README and the guides of waits, flow control, repairs, streams, webhooks and workflows each have one", () => {
    expect(walkThroughs.map((w) => w.file)).toEqual(["README.md", ...["docs/flow-control.md", "docs/repairs.md", "docs/streams.md", "docs/waits.md", "docs/webhooks.md", "docs/workflows.md"]]);
    expect(walkThroughs.flatMap((w) => w.steps).filter((s) => s.answers.length || s.completions.length).length).toBeGreaterThan(20);
  });

  it("reads the server settings each walk-through asks for", () => {
    const settings = Object.fromEntries(walkThroughs.map((w) => [w.file, Object.keys(w.settings).sort()]));
    expect(settings["README.md"]).toEqual([]); // the README's runs on plain `npm start`
    expect(settings["docs/webhooks.md"]).toEqual(["EDDA_BROKER_URL", "EDDA_SECRET", "EDDA_WEBHOOK_STRIPE_SECRET"]);
  });
});

for (const w of walkThroughs) {
  describe(`${w.file}: Try it`, () => {
    let server: NodeServer;
    let shell: Shell;
    let dir: string;
    let databaseUrl: string;
    const env: Record<string, string> = {};

    beforeAll(async () => {
      const [port, brokerPort, pg] = await Promise.all([freePort(), freePort(), freshPostgres(`try_it_${w.file.replace(/\W+/g, "_").toLowerCase()}`)]);
      databaseUrl = pg.url;
      const portOf = (s: string) => s.replace(/\b8787\b/g, String(port)).replace(/\b9999\b/g, String(brokerPort));
      Object.assign(env, { port: String(port), brokerPort: String(brokerPort) });
      const settings = Object.fromEntries(Object.entries(w.settings).map(([k, v]) => [k, portOf(v)]));
      server = await serveNode({ workflows, webhooks, mcp: mcp(), port, env: { ...settings, DATABASE_URL: pg.url, EDDA_SWEEP_INTERVAL_MS: "1000" } });
      dir = await mkdtemp(join(tmpdir(), "edda-try-it-"));
      shell = Shell.start({ BROKER_OUT: join(dir, "broker.out") });
    }, 120_000);

    afterAll(async () => {
      shell?.close();
      await server?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("every command answers as its comments say", { timeout: 600_000 }, async () => {
      let lastOrderSaga: string | undefined;
      let lastOperation: string | undefined;
      const link = async () => {
        const m = await eventually(async () => (/"link":"([^"]+)"/.test(await readFile(join(dir, "broker.out"), "utf8").catch(() => "")) ? null : "the broker never got approval.link_requested"));
        if (m) throw new Error(m);
        return /"link":"([^"]+)"/.exec(await readFile(join(dir, "broker.out"), "utf8"))![1]!;
      };
      await walk(w.steps, {
        shell,
        base: `http://127.0.0.1:${env.port}`,
        fill: (step) => fill(step, { env, databaseUrl, lastOrderSaga, lastOperation, link }),
        onAnswer(command, body) {
          const b = body as Record<string, unknown> | undefined;
          if (/\/workflows\/order_saga\/instances/.test(command) && typeof b?.instanceId === "string") lastOrderSaga = b.instanceId;
          if (typeof b?.operationId === "string") lastOperation = b.operationId;
        },
      });
    });
  });
}

interface FillContext {
  env: Record<string, string>;
  databaseUrl: string;
  lastOrderSaga: string | undefined;
  lastOperation: string | undefined;
  link: () => Promise<string>;
}

/** The command with the test's ports, database and the document's `<…>` placeholders filled in. */
async function fill(step: Step, at: FillContext): Promise<string> {
  let c = step.command.replace(/\b8787\b/g, at.env.port!).replace(/\b9999\b/g, at.env.brokerPort!);
  // The listener standing in for the broker prints to a file rather than into the answers' stream.
  if (/^node -e .*&$/.test(c)) c = c.replace(/&$/, `> "$BROKER_OUT" &`);
  if (c.includes("postgres://…")) c = c.replaceAll("postgres://…", at.databaseUrl);
  // The repairs and the first look-ups are about an order saga: the last one started.
  if (c.includes("<instanceId>")) c = c.replaceAll("<instanceId>", need(at.lastOrderSaga, "<instanceId>", step));
  if (c.includes("<operationId>")) c = c.replaceAll("<operationId>", need(at.lastOperation, "<operationId>", step));
  if (c.includes("<data.link from the event>")) c = c.replaceAll("<data.link from the event>", await at.link());
  const left = /<[A-Za-z][^<>'"=]*>/.exec(c);
  if (left) throw new Error(`${step.source}: no value for ${left[0]}`);
  return c;
}

function need(v: string | undefined, what: string, step: Step): string {
  if (!v) throw new Error(`${step.source}: nothing before it gives ${what}`);
  return v;
}
