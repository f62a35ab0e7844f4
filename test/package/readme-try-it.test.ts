// README's "Try it" walk-through, run as written: every shell line of its sh
// block goes through a real bash and curl to a real server serving the
// example workflows as `npm start` does (functions/node.ts), and every claim
// its → comments make is checked (test/package/readme-claims.ts): the status
// and body of each answer, "<id> completes with {output}", the SSE lines, the
// CLI's output. The server's settings are the ones the README's comments tell
// the reader to start it with (EDDA_SECRET=dev …); only the ports, the
// database URL and the `<…>` placeholders are filled in.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webhooks, workflows } from "../../functions/workflows/index.ts";
import { mcp } from "../../src/mcp.ts";
import { serveNode, type NodeServer } from "../../src/platform/node.ts";
import { freshPostgres } from "../support/engine.ts";
import { freePort } from "../support/postgres-cluster.ts";
import { mismatch, readSteps, type AnswerClaim, type Pattern, type Step } from "./readme-claims.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const POLL_MS = 30_000;

interface Answer {
  status: number;
  body: string;
}

/** One bash for the whole block, so variables (body, t, sig, LINK) carry over as in a terminal. */
class Shell {
  private out = "";
  private err = "";
  constructor(private readonly bash: ChildProcessWithoutNullStreams) {
    bash.stdout.on("data", (d: Buffer) => (this.out += d.toString()));
    bash.stderr.on("data", (d: Buffer) => (this.err += d.toString()));
  }
  static start(env: Record<string, string>): Shell {
    const shell = new Shell(spawn("bash", ["--noprofile", "--norc"], { cwd: ROOT, env: { ...process.env, ...env } }));
    // Each curl reports its status after its body, so one command's several answers (a for loop) can be told apart.
    shell.bash.stdin.write(`curl() { command curl -w '\\n<<<HTTP %{http_code}>>>\\n' "$@"; }\n`);
    return shell;
  }
  async run(command: string, timeoutMs = 120_000): Promise<{ code: number; output: string; answers: Answer[]; stderr: string }> {
    this.out = "";
    this.err = "";
    this.bash.stdin.write(`${command}\nprintf '\\n<<<DONE %s>>>\\n' "$?"\n`);
    const deadline = Date.now() + timeoutMs;
    let done: RegExpExecArray | null;
    while (!(done = /<<<DONE (\d+)>>>/.exec(this.out))) {
      if (Date.now() > deadline) throw new Error(`timed out: ${command}\n${this.out}\n${this.err}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const output = this.out.slice(0, done.index);
    const answers: Answer[] = [];
    let from = 0;
    for (const m of output.matchAll(/\n<<<HTTP (\d{3})>>>\n/g)) {
      answers.push({ status: Number(m[1]), body: output.slice(from, m.index) });
      from = m.index + m[0].length;
    }
    return { code: Number(done[1]), output: output.replace(/\n<<<HTTP \d{3}>>>\n/g, "\n"), answers, stderr: this.err };
  }
  close() {
    this.bash.stdin.end();
    this.bash.kill();
  }
}

const json = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
};

/** Where an answer differs from a claim, or null. */
function answerMismatch(claim: AnswerClaim, a: Answer, output: string): string | null {
  if (claim.status !== undefined && a.status !== claim.status) return `status ${a.status}, README says ${claim.status}: ${a.body}`;
  if (claim.lines) {
    const lines = output.split("\n");
    const at = lines.findIndex((_, i) => claim.lines!.every((l, j) => lines[i + j] === l));
    return at < 0 ? `no consecutive lines ${JSON.stringify(claim.lines)} in the output` : null;
  }
  if (!claim.body) return null;
  if (claim.body.kind === "text") return output.split("\n").some((l) => !mismatch(claim.body!, l.trim())) ? null : `no line of the output matches "${claim.body.parts.join("…")}":\n${output}`;
  return mismatch(claim.body, json(a.body));
}

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
    const answers: Answer[] = [];
    let lastOrderSaga: string | undefined;
    let lastOperation: string | undefined;
    const view = async (id: string) => {
      const res = await fetch(`http://127.0.0.1:${env.port}/instances/${encodeURIComponent(id)}`);
      return res.ok ? ((await res.json()) as Record<string, unknown>) : null;
    };
    const link = async () => {
      const deadline = Date.now() + POLL_MS;
      for (;;) {
        const m = /"link":"([^"]+)"/.exec(await readFile(join(dir, "broker.out"), "utf8").catch(() => ""));
        if (m) return m[1]!;
        if (Date.now() > deadline) throw new Error(`the broker never got approval.link_requested: ${await readFile(join(dir, "broker.out"), "utf8").catch(String)} ${JSON.stringify(await view("al1"))} ${(await shell.run("jobs -l; cat \"$BROKER_OUT\"")).output}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };

    for (const step of steps) {
      const command = await fill(step, { lastOrderSaga, lastOperation, link });
      const isGet = !/-X\s?POST/.test(command) && /^curl /.test(command);
      let r = await shell.run(command);
      // A GET shows the settled state; poll it while the README's answer is still on its way.
      const deadline = Date.now() + POLL_MS;
      const failures = () => step.answers.map((c, i) => answerMismatch(c, r.answers.at(i - step.answers.length) ?? { status: 0, body: "" }, r.output)).filter(Boolean);
      while (isGet && failures().length && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 200));
        r = await shell.run(command);
      }
      expect(r.code, `${step.source}\n${r.stderr}`).toBe(0);
      answers.push(...r.answers);
      for (const a of r.answers) {
        const body = json(a.body) as Record<string, unknown> | undefined;
        if (/\/workflows\/order_saga\/instances/.test(command) && typeof body?.instanceId === "string") lastOrderSaga = body.instanceId;
        if (typeof body?.operationId === "string") lastOperation = body.operationId;
      }
      const claimed = step.answers.map((c, i) => ({ c, a: answers.at(i - step.answers.length)! }));
      for (const { c, a } of claimed) {
        let m = answerMismatch(c, a, r.output);
        // A start that answers while the instance is still moving (singleton: "now in the 5 s sleep"): the status it reaches.
        const body = json(a.body) as Record<string, unknown> | undefined;
        const status = c.body?.kind === "object" ? c.body.members.find(([k]) => k === "status")?.[1] : undefined;
        if (m && !isGet && status?.kind === "text" && typeof body?.instanceId === "string" && !answerMismatch({ ...c, body: withoutStatus(c.body!) }, a, r.output)) {
          m = await eventually(async () => mismatch(status, (await view(body.instanceId as string))?.status));
        }
        expect(m, `${step.source}\n→ ${a.status} ${a.body}`).toBeNull();
      }
      // Every answer the README does not give a status for is a success.
      for (const a of r.answers.slice(0, r.answers.length - step.answers.length)) expect(a.status, `${step.source}\n→ ${a.body}`).toBeLessThan(400);
      for (const a of claimed.filter(({ c }) => c.status === undefined)) expect(a.a.status, `${step.source}\n→ ${a.a.body}`).toBeLessThan(400);
      for (const done of step.completions) {
        const m = await eventually(async () => {
          const v = await view(done.instanceId);
          return v?.status !== "completed" ? `${done.instanceId} is ${String(v?.status)}` : mismatch(done.output, v.output);
        });
        expect(m, `${step.source}: ${done.instanceId} completes with …`).toBeNull();
      }
    }
  });
});

function withoutStatus(p: Pattern): Pattern {
  return p.kind === "object" ? { ...p, members: p.members.filter(([k]) => k !== "status") } : p;
}

async function eventually(check: () => Promise<string | null>): Promise<string | null> {
  const deadline = Date.now() + POLL_MS;
  for (;;) {
    const m = await check();
    if (!m || Date.now() > deadline) return m;
    await new Promise((r) => setTimeout(r, 100));
  }
}

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
