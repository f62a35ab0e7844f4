// The CLI as a user runs it, as real processes: `edda-edge dev` serves a
// workflows module on embedded PGlite and restarts when the module changes
// (the data survives the reload); the remote commands (start, instances,
// send, publish) drive that server over its HTTP API with a bearer token,
// print JSON with --json, and exit 1 when the app refuses, 2 on bad usage.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/postgres-cluster.ts";
import { ROOT, spawnServer, type Server } from "../runtime/processes.ts";

const BIN = join(ROOT, "bin", "edda-edge.mjs");
const TOKEN = "cli-test-token";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
const cli = (args: string[], env: Record<string, string | undefined> = {}): Promise<Run> =>
  promisify(execFile)(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, EDDA_URL: undefined, EDDA_API_TOKEN: undefined, ...env } }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

const moduleSource = (greeting: string) => `
import { activity, receive, sleep, subscribe, waitMessage, workflow } from ${JSON.stringify(join(ROOT, "src", "index.ts"))};
const greet = activity("greet", async (_ctx, name: string) => \`${greeting} \${name}\`);
export const hello = workflow("hello", async (ctx, input: { name: string }) => greet(ctx, input.name));
export const approval = workflow("approval", async (ctx) => (await waitMessage<{ ok: boolean }>(ctx, "decision")).data);
export const listener = workflow("listener", async (ctx) => {
  await subscribe(ctx, "news", "broadcast");
  return (await receive<string>(ctx, "news")).data;
});
export const napper = workflow("napper", async (ctx) => { await sleep(ctx, 3600); return "woke"; });
export const yearly = workflow("yearly", { schedule: "0 0 1 1 *" }, async () => "new year");
`;

let dir: string;
let server: Server;
let remote: Record<string, string>;

async function waitFor(id: string, status: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await cli(["instances", "show", id, "--json"], remote);
    const view = r.code === 0 ? (JSON.parse(r.stdout) as Record<string, unknown>) : null;
    if (view?.status === status) return view;
    if (Date.now() > deadline) throw new Error(`${id} did not reach ${status}: ${r.stdout}${r.stderr}`);
    await new Promise((res) => setTimeout(res, 250));
  }
}

async function start(workflow: string, input?: string): Promise<string> {
  const r = await cli(["start", workflow, ...(input ? [input] : []), "--json"], remote);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { instanceId: string }).instanceId;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "edda-cli-"));
  await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  await writeFile(join(dir, "workflows.ts"), moduleSource("hello"));
  const port = await freePort();
  server = await spawnServer({
    command: process.execPath,
    args: [BIN, "dev", join(dir, "workflows.ts"), "--port", String(port), "--data-dir", join(dir, "data")],
    port,
    env: { EDDA_API_TOKEN: TOKEN, EDDA_SWEEP_INTERVAL_MS: "500" },
    startTimeoutMs: 180_000,
  });
  remote = { EDDA_URL: server.url, EDDA_API_TOKEN: TOKEN };
}, 200_000);

afterAll(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("edda-edge dev", () => {
  it("serves the module's workflows and reloads them when the file changes, keeping the data", { timeout: 360_000 }, async () => {
    const first = await start("hello", '{"name":"ada"}');
    expect((await waitFor(first, "completed")).output).toBe("hello ada");

    const before = server.output().length;
    await writeFile(join(dir, "workflows.ts"), moduleSource("goodbye"));
    const deadline = Date.now() + 180_000;
    while (!/changed, reloading[\s\S]*edda-edge dev: .*hello.* on http/.test(server.output().slice(before))) {
      if (Date.now() > deadline) throw new Error(`no reload:\n${server.output()}`);
      await new Promise((res) => setTimeout(res, 250));
    }
    const second = await start("hello", '{"name":"bob"}');
    expect((await waitFor(second, "completed")).output).toBe("goodbye bob");
    // The first instance is still there: the reload kept the PGlite data.
    const list = await cli(["instances", "list", "--workflow", "hello", "--json"], remote);
    expect((JSON.parse(list.stdout) as { instances: { instanceId: string }[] }).instances.map((i) => i.instanceId).sort()).toEqual([first, second].sort());
    const show = await cli(["instances", "show", first, "--history", "--json"], remote);
    expect((JSON.parse(show.stdout) as { history: { activityId: string }[] }).history.map((h) => h.activityId)).toContain("greet:1");
  });

  it("dev --help prints its usage; a missing module is a usage error", { timeout: 180_000 }, async () => {
    const help = await cli(["dev", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("usage: edda-edge dev <module>");
    const missing = await cli(["dev", join(dir, "nope.ts")]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("no such file");
  });
});

describe("remote commands", () => {
  it("send delivers a message to one waiting instance", { timeout: 180_000 }, async () => {
    const id = await start("approval");
    await waitFor(id, "waiting_for_message");
    const r = await cli(["send", id, "decision", '{"ok":true}', "--json"], remote);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: "accepted", messageId: expect.any(String) as unknown });
    expect((await waitFor(id, "completed")).output).toEqual({ ok: true });
  });

  it("publish reaches a subscriber of the channel; without --json it prints a line", { timeout: 180_000 }, async () => {
    const id = await start("listener");
    await waitFor(id, "waiting_for_message");
    const r = await cli(["publish", "news", "extra"], remote);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^published message \S+ on "news"\n$/);
    expect((await waitFor(id, "completed")).output).toBe("extra");
  });

  it("why prints a sleeping instance's reason in two lines, --json its facts; an unknown id exits 1 with the 404", { timeout: 180_000 }, async () => {
    const id = await start("napper");
    await waitFor(id, "waiting_for_timer");
    const r = await cli(["why", id], remote);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(new RegExp(`^${id} waiting_for_timer — timer: sleeping at sleep:1 until \\S+ \\(in 60 min\\)`));
    expect(lines[1]).toMatch(/^ {2}next: its timer fires at `until`/);
    const json = await cli(["why", id, "--json"], remote);
    expect(JSON.parse(json.stdout)).toMatchObject({ instanceId: id, status: "waiting_for_timer", reason: { kind: "timer", facts: { timerId: "sleep:1" } } });
    const unknown = await cli(["why", "no-such-instance"], remote);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("404");
    expect((await cli(["why"], remote)).code).toBe(2);
  });

  it("instances cancel cancels a sleeping instance; cancelling it again exits 1", { timeout: 180_000 }, async () => {
    const id = await start("napper");
    await waitFor(id, "waiting_for_timer");
    const r = await cli(["instances", "cancel", id], remote);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(`${id} cancelled`);
    const show = await cli(["instances", "show", id, "--json"], remote);
    expect((JSON.parse(show.stdout) as { status: string }).status).toBe("cancelled");
    // Cancelling again is refused by the app (409): exit 1, the reason on stderr.
    const again = await cli(["instances", "cancel", id], remote);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("409");
  });

  it("instances rerun|fork|bulk and schedules pause|resume|trigger drive the repair routes; refusals exit 1", { timeout: 180_000 }, async () => {
    const id = await start("hello", '{"name":"ada"}');
    const done = await waitFor(id, "completed");
    const rerun = await cli(["instances", "rerun", id, "--input", '{"name":"bob"}', "--request-id", "cli-r1", "--json"], remote);
    expect(rerun.code, rerun.stderr).toBe(0);
    const rerunId = (JSON.parse(rerun.stdout) as { instanceId: string }).instanceId;
    expect((await waitFor(rerunId, "completed")).rerunOf).toBe(id);
    const first = ((done.history ?? (JSON.parse((await cli(["instances", "show", id, "--history", "--json"], remote)).stdout) as { history: { activityId: string }[] }).history) as { activityId: string }[])[0]!;
    const fork = await cli(["instances", "fork", id, first.activityId], remote);
    expect(fork.code, fork.stderr).toBe(0);
    expect(fork.stdout).toContain(`fork of ${id} from ${first.activityId}`);
    const napper = await start("napper");
    await waitFor(napper, "waiting_for_timer");
    const dry = await cli(["instances", "bulk", "cancel", "--workflow", "napper", "--status", "waiting_for_timer", "--dry-run", "--json"], remote);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true });
    const bulk = await cli(["instances", "bulk", "cancel", "--workflow", "napper", "--status", "waiting_for_timer", "--request-id", "cli-b1"], remote);
    expect(bulk.code, bulk.stderr).toBe(0);
    expect(bulk.stdout).toContain("operation bulk-cli-b1: cancel");
    await waitFor(napper, "cancelled");
    expect((await cli(["instances", "bulk", "delete"], remote)).code).toBe(2);
    const paused = await cli(["schedules", "pause", "yearly"], remote);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toContain("yearly paused since");
    expect((await cli(["schedules", "list"], remote)).stdout).toContain("yearly  0 0 1 1 *  paused since");
    const trigger = await cli(["schedules", "trigger", "yearly", "--request-id", "cli-t1", "--json"], remote);
    expect(trigger.code, trigger.stderr).toBe(0);
    await waitFor((JSON.parse(trigger.stdout) as { instanceId: string }).instanceId, "completed");
    expect((await cli(["schedules", "resume", "yearly"], remote)).stdout).toContain("yearly ticking, next");
    const unknown = await cli(["schedules", "pause", "nope"], remote);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("404");
  });

  it("the token comes from --token or EDDA_API_TOKEN; a wrong one exits 1 and changes nothing", { timeout: 180_000 }, async () => {
    const countHello = async () => (JSON.parse((await cli(["instances", "list", "--workflow", "hello", "--json"], remote)).stdout) as { instances: unknown[] }).instances.length;
    const before = await countHello();
    const wrong = await cli(["start", "hello", '{"name":"eve"}'], { EDDA_URL: server.url, EDDA_API_TOKEN: "wrong" });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("401");
    expect(await countHello()).toBe(before);
    const flag = await cli(["instances", "list", "--url", server.url, "--token", TOKEN, "--json"]);
    expect(flag.code, flag.stderr).toBe(0);
  });

  it("bad usage exits 2 with the command's usage; an unreachable app exits 1", { timeout: 300_000 }, async () => {
    const notHttp = await cli(["instances", "list", "--url", "ftp://example.org"]);
    expect(notHttp.code).toBe(2);
    expect(notHttp.stderr).toContain("is not an http(s) URL");
    const badFlag = await cli(["publish", "news", "--frob"], remote);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain("usage: edda-edge publish");
    const unknown = await cli(["instances", "frob"], remote);
    expect(unknown.code).toBe(2);
    const down = await cli(["instances", "list", "--url", `http://127.0.0.1:${await freePort()}`]);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain("cannot reach");
    const commands = ["start", "instances", "send", "publish", "migrate", "dev"];
    const helps = await Promise.all(commands.map((command) => cli([command, "--help"])));
    commands.forEach((command, i) => {
      expect(helps[i]!.code, command).toBe(0);
      expect(helps[i]!.stdout, command).toContain(`usage: edda-edge ${command}`);
    });
  });
});
