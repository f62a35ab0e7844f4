// `edda-edge verify-replay` as a user runs it before a deploy: a real process
// reads the in-flight instances of a real Postgres and replays them against
// the module about to be deployed; exit 0 when every history fits, 1 (and
// the diverging instances, with both activity names) when one would not.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activity, waitMessage, workflow } from "../../src/index.ts";
import type { Database } from "../../src/storage/database.ts";
import { ROOT } from "../runtime/processes.ts";
import { freshPostgres, makeTestApp, type TestApp } from "../support/engine.ts";

const BIN = join(ROOT, "bin", "edda-edge.mjs");
const cli = (args: string[], env: Record<string, string | undefined>) =>
  promisify(execFile)(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, ...env } }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

// The code running now: two instances wait for a message after one activity.
const stepB = activity("vr_step_b", async () => "b");
const running = workflow("vr_flow", async (ctx) => {
  await stepB(ctx);
  await waitMessage(ctx, "go");
});

const index = JSON.stringify(join(ROOT, "src", "index.ts"));
const compatible = `
import { activity, patched, waitMessage, workflow } from ${index};
const stepB = activity("vr_step_b", async () => "b");
const stepC = activity("vr_step_c", async () => "c");
export const flow = workflow("vr_flow", async (ctx) => {
  if (await patched(ctx, "use-c")) await stepC(ctx); else await stepB(ctx);
  await waitMessage(ctx, "go");
});`;
const careless = `
import { activity, waitMessage, workflow } from ${index};
const stepC = activity("vr_step_c", async () => "c");
export const flow = workflow("vr_flow", async (ctx) => {
  await stepC(ctx);
  await waitMessage(ctx, "go");
});`;
const sealedModule = `
import { activity, waitMessage, workflow } from ${index};
const secret = activity("vr_secret", async (_ctx, s) => ({ s }));
export const flow = workflow("vr_sealed", async (ctx, input) => {
  await secret(ctx, input.secret);
  await waitMessage(ctx, "go");
});`;
const secretStep = activity("vr_secret", async (_ctx, s: string) => ({ s }));
const sealedFlow = workflow("vr_sealed", async (ctx, input: { secret: string }) => {
  await secretStep(ctx, input.secret);
  await waitMessage(ctx, "go");
});
const KEY = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
let sealedApp: TestApp;
let sealedPg: { url: string; open(): Database };
const unrelated = `
import { workflow } from ${index};
export const other = workflow("vr_other", async () => null);`;

let pg: { url: string; open(): Database };
let app: TestApp;
let dir: string;
const ids: string[] = [];

beforeAll(async () => {
  pg = await freshPostgres("verifyreplay");
  app = makeTestApp(pg.open(), { workflows: [running] });
  for (let i = 0; i < 2; i++) ids.push((await app.edda.start("vr_flow", null)).instanceId);
  for (const id of ids) await app.waitFor(id, ["waiting_for_message"]);
  dir = await mkdtemp(join(tmpdir(), "edda-verify-"));
  await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  await writeFile(join(dir, "compatible.ts"), compatible);
  await writeFile(join(dir, "careless.ts"), careless);
  await writeFile(join(dir, "unrelated.ts"), unrelated);
  await writeFile(join(dir, "sealed.ts"), sealedModule);
  sealedPg = await freshPostgres("verifyreplay_sealed");
  sealedApp = makeTestApp(sealedPg.open(), { workflows: [sealedFlow], encryptionKeys: KEY });
  await sealedApp.edda.start("vr_sealed", { secret: "canary-vr" }, { instanceId: "vr-sealed-1" });
  await sealedApp.waitFor("vr-sealed-1", ["waiting_for_message"]);
}, 60_000);

afterAll(async () => {
  await sealedApp?.dispatcher.close();
  await sealedApp?.database.close();
  await app?.dispatcher.close();
  await app?.database.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("edda-edge verify-replay", () => {
  it("exits 0 when the new code replays every in-flight history (patched keeps the old path)", { timeout: 60_000 }, async () => {
    const r = await cli(["verify-replay", join(dir, "compatible.ts"), "--json"], { DATABASE_URL: pg.url });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { checked: number; diverging: number; instances: { instanceId: string; ok: boolean; detail: string }[] };
    expect(report.checked).toBe(2);
    expect(report.diverging).toBe(0);
    expect(report.instances.map((i) => i.detail)).toEqual(["wait receive_go:1", "wait receive_go:1"]);
  });

  it("exits 1 and names each diverging instance with both activity names; nothing in the database changes", { timeout: 60_000 }, async () => {
    const r = await cli(["verify-replay", join(dir, "careless.ts")], { DATABASE_URL: pg.url });
    expect(r.code).toBe(1);
    for (const id of ids) expect(r.stdout).toMatch(new RegExp(`DIVERGES  ${id}  vr_flow \\(waiting_for_message\\): .*"vr_step_b".*"vr_step_c"`));
    expect(r.stdout).toContain("2 in-flight instance(s) checked, 2 would diverge");
    for (const id of ids) expect((await app.edda.getInstance(id))?.status).toBe("waiting_for_message");
  });

  it("a workflow missing from the module is a failure; bad usage exits 2", { timeout: 60_000 }, async () => {
    const missing = await cli(["verify-replay", join(dir, "unrelated.ts"), "--json"], { DATABASE_URL: pg.url });
    expect(missing.code).toBe(1);
    expect((JSON.parse(missing.stdout) as { instances: { detail: string }[] }).instances[0]!.detail).toContain('workflow "vr_flow" is not in');
    expect((await cli(["verify-replay", join(dir, "compatible.ts"), "--limit", "0"], { DATABASE_URL: pg.url })).code).toBe(2);
    // --database-url names the database; --url is its deprecated alias (it names the app elsewhere).
    const flag = await cli(["verify-replay", join(dir, "compatible.ts"), "--json", "--database-url", pg.url], { DATABASE_URL: undefined });
    expect(flag.code, flag.stderr).toBe(0);
    expect(flag.stderr).toBe("");
    const alias = await cli(["verify-replay", join(dir, "compatible.ts"), "--json", "--url", pg.url], { DATABASE_URL: undefined });
    expect(alias.code, alias.stderr).toBe(0);
    expect(alias.stderr).toContain("--url is deprecated here");
    expect(JSON.parse(alias.stdout)).toEqual(JSON.parse(flag.stdout));
  });

  it("reads encrypted histories with EDDA_ENCRYPTION_KEY; without it, a PayloadDecryptionError names what is missing", { timeout: 60_000 }, async () => {
    const keyed = await cli(["verify-replay", join(dir, "sealed.ts"), "--json", "--workflow", "vr_sealed"], { DATABASE_URL: sealedPg.url, EDDA_ENCRYPTION_KEY: KEY });
    expect(keyed.code, keyed.stderr).toBe(0);
    expect((JSON.parse(keyed.stdout) as { instances: { detail: string }[] }).instances).toEqual([expect.objectContaining({ instanceId: "vr-sealed-1", ok: true, detail: "wait receive_go:1" })]);
    const keyless = await cli(["verify-replay", join(dir, "sealed.ts"), "--json", "--workflow", "vr_sealed"], { DATABASE_URL: sealedPg.url, EDDA_ENCRYPTION_KEY: undefined, EDDA_ENCRYPTION_KEYS: undefined });
    expect(keyless.code).not.toBe(0);
    expect(keyless.stdout + keyless.stderr).toMatch(/PayloadDecryptionError|encrypted and no key is set/);
  });
});
