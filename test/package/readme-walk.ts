// Runs a walk-through of the README or a guide (readme-claims.ts) as a reader would: one real
// bash for the whole block, so variables (body, t, sig, LINK) carry over as
// in a terminal, real curl against a real server, and each command's claims
// checked against what it printed.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { join } from "node:path";
import { expect } from "vitest";
import { mismatch, type AnswerClaim, type Pattern, type Step } from "./readme-claims.ts";

export const ROOT = join(import.meta.dirname, "..", "..");
const POLL_MS = 30_000;

export interface Answer {
  status: number;
  body: string;
}

export class Shell {
  private out = "";
  private err = "";
  private constructor(private readonly bash: ChildProcessWithoutNullStreams) {
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

export const json = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
};

/** Where an answer differs from a claim, or null. */
function answerMismatch(claim: AnswerClaim, a: Answer, output: string): string | null {
  if (claim.status !== undefined && a.status !== claim.status) return `status ${a.status}, the document says ${claim.status}: ${a.body}`;
  if (claim.lines) {
    const lines = output.split("\n");
    const at = lines.findIndex((_, i) => claim.lines!.every((l, j) => lines[i + j] === l));
    return at < 0 ? `no consecutive lines ${JSON.stringify(claim.lines)} in the output` : null;
  }
  if (!claim.body) return null;
  if (claim.body.kind === "text") return output.split("\n").some((l) => !mismatch(claim.body!, l.trim())) ? null : `no line of the output matches "${claim.body.parts.join("…")}":\n${output}`;
  return mismatch(claim.body, json(a.body));
}

function withoutStatus(p: Pattern): Pattern {
  return p.kind === "object" ? { ...p, members: p.members.filter(([k]) => k !== "status") } : p;
}

export async function eventually(check: () => Promise<string | null>): Promise<string | null> {
  const deadline = Date.now() + POLL_MS;
  for (;;) {
    const m = await check();
    if (!m || Date.now() > deadline) return m;
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface WalkOptions {
  shell: Shell;
  /** The server the commands reach, for looking instances up. */
  base: string;
  /** The command as it is run: ports, database and placeholders filled in. */
  fill(step: Step): Promise<string>;
  /** Each answer, as it comes (to fill later placeholders from). */
  onAnswer?(command: string, body: unknown): void;
}

/**
 * Every step in order: its exit code 0, each answer the document gives no
 * status for a success, each claim met. A GET shows the settled state, so it
 * is polled while the document's answer is still on its way; a start that
 * answers while its instance is moving (a singleton "now in the 5 s sleep")
 * is held to the status the instance reaches.
 */
export async function walk(steps: Step[], o: WalkOptions): Promise<void> {
  const answers: Answer[] = [];
  const view = async (id: string) => {
    const res = await fetch(`${o.base}/instances/${encodeURIComponent(id)}`);
    return res.ok ? ((await res.json()) as Record<string, unknown>) : null;
  };
  for (const step of steps) {
    const command = await o.fill(step);
    const isGet = /\bcurl\b/.test(command) && !/-X\s?POST/.test(command);
    let r = await o.shell.run(command);
    const deadline = Date.now() + POLL_MS;
    const failures = () => step.answers.map((c, i) => answerMismatch(c, r.answers.at(i - step.answers.length) ?? { status: 0, body: "" }, r.output)).filter(Boolean);
    while (isGet && failures().length && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 200));
      r = await o.shell.run(command);
    }
    expect(r.code, `${step.source}\n${r.stderr}`).toBe(0);
    answers.push(...r.answers);
    for (const a of r.answers) o.onAnswer?.(command, json(a.body));
    const claimed = step.answers.map((c, i) => ({ c, a: answers.at(i - step.answers.length) ?? { status: 0, body: "" } }));
    for (const { c, a } of claimed) {
      let m = answerMismatch(c, a, r.output);
      const body = json(a.body) as Record<string, unknown> | undefined;
      const status = c.body?.kind === "object" ? c.body.members.find(([k]) => k === "status")?.[1] : undefined;
      if (m && !isGet && status?.kind === "text" && typeof body?.instanceId === "string" && !answerMismatch({ ...c, body: withoutStatus(c.body!) }, a, r.output)) {
        m = await eventually(async () => mismatch(status, (await view(body.instanceId as string))?.status));
      }
      expect(m, `${step.source}\n→ ${a.status} ${a.body}`).toBeNull();
      if (c.status === undefined && a.status) expect(a.status, `${step.source}\n→ ${a.body}`).toBeLessThan(400);
    }
    for (const a of r.answers.slice(0, Math.max(0, r.answers.length - step.answers.length))) expect(a.status, `${step.source}\n→ ${a.body}`).toBeLessThan(400);
    for (const done of step.completions) {
      const m = await eventually(async () => {
        const v = await view(done.instanceId);
        return v?.status !== "completed" ? `${done.instanceId} is ${String(v?.status)}` : mismatch(done.output, v.output);
      });
      expect(m, `${step.source}: ${done.instanceId} completes with …`).toBeNull();
    }
  }
}
