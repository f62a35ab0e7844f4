// The CLI on a laptop, as real processes: with `edda-edge dev` serving on
// 127.0.0.1:8787 (where `npm start` listens too), in open mode, the remote
// commands need no flag and no variable at all; EDDA_URL and --url may be
// host:port. A refusal prints the problem with each validation issue's path
// (and the problem itself with --json); a start posted without the input
// wrapper is impossible from the CLI; malformed JSON arguments are refused
// with the parse error before anything is sent; an unknown --status lists
// the valid ones. Valid commands still work after every refusal.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, spawnServer, type Server } from "../runtime/processes.ts";

const BIN = join(ROOT, "bin", "edda-edge.mjs");
const PORT = 8787;

const cli = (args: string[], env: Record<string, string | undefined> = {}) =>
  promisify(execFile)(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, EDDA_URL: undefined, EDDA_API_TOKEN: undefined, ...env } }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

const source = `
import { z } from ${JSON.stringify(join(ROOT, "node_modules", "zod", "index.js"))};
import { activity, workflow } from ${JSON.stringify(join(ROOT, "src", "index.ts"))};
const charge = activity("charge", async (_ctx, amount: number) => amount * 2);
export const order = workflow("order", { input: z.object({ orderId: z.string(), amount: z.number().positive(), lines: z.array(z.object({ sku: z.string() })).optional() }) }, async (ctx, input) => charge(ctx, input.amount));
export const echo = workflow("echo", async (_ctx, input: unknown) => input);
`;

/** 8787 is the default: wait for it to be free (another run may hold it briefly) rather than pick another. */
async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer().once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

let dir: string;
let server: Server;

beforeAll(async () => {
  const deadline = Date.now() + 120_000;
  while (!(await portFree(PORT))) {
    if (Date.now() > deadline) throw new Error(`port ${PORT} stayed busy: this test needs the default port`);
    await new Promise((r) => setTimeout(r, 1000));
  }
  dir = await mkdtemp(join(tmpdir(), "edda-cli-defaults-"));
  await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  await writeFile(join(dir, "workflows.ts"), source);
  server = await spawnServer({
    command: process.execPath,
    args: [BIN, "dev", join(dir, "workflows.ts"), "--no-watch", "--json", "--data-dir", join(dir, "data")],
    port: PORT,
    env: { EDDA_SWEEP_INTERVAL_MS: "500" },
    startTimeoutMs: 180_000,
  });
}, 300_000);
afterAll(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function waitCompleted(id: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await cli(["instances", "show", id, "--json"]);
    const view = r.code === 0 ? (JSON.parse(r.stdout) as Record<string, unknown>) : null;
    if (view?.status === "completed") return view;
    if (Date.now() > deadline) throw new Error(`${id}: ${r.stdout}${r.stderr}`);
    await new Promise((res) => setTimeout(res, 250));
  }
}

describe("the CLI with no flags against a server on the default port", () => {
  it("dev --json says where it listens; start, instances list/show, send and publish need no flag", { timeout: 180_000 }, async () => {
    expect(JSON.parse(server.output().split("\n").find((l) => l.startsWith("{"))!)).toMatchObject({ url: "http://127.0.0.1:8787", workflows: expect.arrayContaining(["order", "echo"]) });
    const started = await cli(["start", "order", '{"orderId":"o1","amount":5}', "--id", "cli-o1"]);
    expect(started.code, started.stderr).toBe(0);
    expect(started.stdout).toMatch(/^cli-o1 /);
    expect((await waitCompleted("cli-o1")).output).toBe(10);
    const list = await cli(["instances", "list"]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain("cli-o1  order  completed");
    // A bare word is a string.
    expect((await cli(["start", "echo", "ada", "--id", "cli-ada"])).code).toBe(0);
    expect((await waitCompleted("cli-ada")).output).toBe("ada");
    expect((await cli(["publish", "news", '{"n":1}'])).code).toBe(0);
  });

  it("EDDA_URL and --url may be host:port", { timeout: 120_000 }, async () => {
    for (const env of [{ EDDA_URL: "127.0.0.1:8787" }, { EDDA_URL: "localhost:8787" }]) {
      const r = await cli(["instances", "list", "--json"], env);
      expect(r.code, `${env.EDDA_URL}: ${r.stderr}`).toBe(0);
    }
    const flag = await cli(["instances", "list", "--url", "127.0.0.1:8787", "--json"], { EDDA_URL: "http://127.0.0.1:1" });
    expect(flag.code, flag.stderr).toBe(0); // --url wins over EDDA_URL
    const viaEnv = await cli(["instances", "list"], { EDDA_URL: "127.0.0.1:1" }); // EDDA_URL wins over the default
    expect(viaEnv.code).toBe(1);
    expect(viaEnv.stderr).toContain("cannot reach http://127.0.0.1:1 (EDDA_URL");
  });

  it("a refused start prints each validation issue with its path, and the problem with --json", { timeout: 120_000 }, async () => {
    const r = await cli(["start", "order", '{"orderId":"o2","amount":-3,"lines":[{"sku":7}]}']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("→ 422 Unprocessable Content");
    expect(r.stderr).toMatch(/^ {2}amount: /m);
    expect(r.stderr).toMatch(/^ {2}lines\[0\]\.sku: /m);
    const json = await cli(["start", "order", '{"orderId":"o2","amount":-3}', "--json"]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ type: "about:blank", status: 422, error_type: "ValidationError", issues: [expect.objectContaining({ path: ["amount"] })] });
    const missing = await cli(["instances", "show", "nope"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("→ 404 Not Found");
  });

  it("malformed JSON arguments are refused with the parse error, enum flags list their values; nothing is sent", { timeout: 120_000 }, async () => {
    const count = async () => (JSON.parse((await cli(["instances", "list", "--json"])).stdout) as { instances: unknown[] }).instances.length;
    const before = await count();
    for (const args of [
      ["start", "order", '{"orderId":"o3","amount":5,'],
      ["start", "echo", "12abc"],
      ["send", "cli-o1", "approval", "{nope}"],
      ["publish", "news", "[1,2"],
      ["publish", "news", "x", "--metadata", "{bad"],
    ]) {
      const r = await cli(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr, args.join(" ")).toMatch(/is not valid JSON: .*(JSON|Unexpected|Expected)/);
    }
    const status = await cli(["instances", "list", "--status", "running,bogus"]);
    expect(status.code).toBe(2);
    expect(status.stderr).toContain('--status "bogus" is not a status; valid values: running, waiting_for_timer');
    expect((await cli(["instances", "list", "--limit", "500"])).stderr).toContain("--limit must be an integer from 1 to 100");
    expect(await count()).toBe(before);
    // Valid traffic after the refusals.
    expect((await cli(["instances", "list", "--status", "completed", "--limit", "5"])).code).toBe(0);
    expect((await cli(["start", "echo", '{"ok":true}', "--id", "cli-after"])).code).toBe(0);
    expect((await waitCompleted("cli-after")).output).toEqual({ ok: true });
  });
});
