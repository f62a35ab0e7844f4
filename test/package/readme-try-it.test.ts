// README's "Try it" walk-through, run as written (readme-walk.ts): every shell
// line of its sh block goes through a real bash and curl to a real server serving the
// example workflows as `npm start` does (functions/node.ts), and every claim
// its → comments make is checked (test/package/readme-claims.ts): the status
// and body of each answer, "<id> completes with {output}", the SSE lines, the
// CLI's output. The server's settings are the ones the README's comments tell
// the reader to start it with (EDDA_SECRET=dev …); only the ports, the
// database URL and the `<…>` placeholders are filled in.
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


let server: NodeServer;
let shell: Shell;
let dir: string;
let databaseUrl: string;
const env: Record<string, string> = {};

// What the README's comments say to start the server with, e.g. "start the server with EDDA_WEBHOOK_STRIPE_SECRET=whsec_test".
const readme = await readFile(join(ROOT, "README.md"), "utf8");
const steps = readSteps(readme, "## Try it");
const section = readme.slice(readme.indexOf("## Try it"), readme.indexOf("\n## ", readme.indexOf("## Try it") + 1));
const serverSettings = Object.fromEntries(
  section
    .split("\n")
    .filter((l) => l.trimStart().startsWith("#"))
    .flatMap((l) => [...l.matchAll(/\b(EDDA_[A-Z_]+)=([^\s;,)]+)/g)].map((m) => [m[1]!, m[2]!] as const)),
);

beforeAll(async () => {
  const [port, brokerPort, pg] = await Promise.all([freePort(), freePort(), freshPostgres("readme_try_it")]);
  databaseUrl = pg.url;
  const portOf = (s: string) => s.replace(/\b8787\b/g, String(port)).replace(/\b9999\b/g, String(brokerPort));
  Object.assign(env, { port: String(port), brokerPort: String(brokerPort) });
  const settings = Object.fromEntries(Object.entries(serverSettings).map(([k, v]) => [k, portOf(v)]));
  server = await serveNode({ workflows, webhooks, mcp: mcp(), port, env: { ...settings, DATABASE_URL: pg.url, EDDA_SWEEP_INTERVAL_MS: "1000" } });
  dir = await mkdtemp(join(tmpdir(), "edda-readme-"));
  shell = Shell.start({ BROKER_OUT: join(dir, "broker.out") });
}, 120_000);

afterAll(async () => {
  shell?.close();
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("README: Try it", () => {
  it("reads the server settings the walk-through asks for", () => {
    expect(Object.keys(serverSettings).sort()).toEqual(["EDDA_BROKER_URL", "EDDA_SECRET", "EDDA_WEBHOOK_STRIPE_SECRET"]);
    expect(steps.filter((s) => s.answers.length || s.completions.length).length).toBeGreaterThan(20);
  });

  it("every command answers as its comments say", { timeout: 600_000 }, async () => {
    let lastOrderSaga: string | undefined;
    let lastOperation: string | undefined;
    const link = async () => {
      const m = await eventually(async () => (/"link":"([^"]+)"/.test(await readFile(join(dir, "broker.out"), "utf8").catch(() => "")) ? null : "the broker never got approval.link_requested"));
      if (m) throw new Error(m);
      return /"link":"([^"]+)"/.exec(await readFile(join(dir, "broker.out"), "utf8"))![1]!;
    };
    await walk(steps, {
      shell,
      base: `http://127.0.0.1:${env.port}`,
      fill: (step) => fill(step, { lastOrderSaga, lastOperation, link }),
      onAnswer(command, body) {
        const b = body as Record<string, unknown> | undefined;
        if (/\/workflows\/order_saga\/instances/.test(command) && typeof b?.instanceId === "string") lastOrderSaga = b.instanceId;
        if (typeof b?.operationId === "string") lastOperation = b.operationId;
      },
    });
  });
});

/** The command with the test's ports, database and the README's `<…>` placeholders filled in. */
async function fill(step: Step, at: { lastOrderSaga: string | undefined; lastOperation: string | undefined; link: () => Promise<string> }): Promise<string> {
  let c = step.command.replace(/\b8787\b/g, env.port!).replace(/\b9999\b/g, env.brokerPort!);
  // The listener standing in for the broker prints to a file rather than into the answers' stream.
  if (/^node -e .*&$/.test(c)) c = c.replace(/&$/, `> "$BROKER_OUT" &`);
  if (c.includes("postgres://…")) c = c.replaceAll("postgres://…", databaseUrl);
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
