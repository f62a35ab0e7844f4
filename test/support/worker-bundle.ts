// Builds the Worker bundle exactly as a deploy would (`wrangler deploy
// --dry-run --outdir`) and measures it: raw and gzipped size of the script,
// which source files and packages went into it (from esbuild's metafile), and
// what wrangler warned about. Either the repository's own Worker
// (functions/worker.ts, the examples, MCP on) or the README's Worker recipe
// built from the sources, as written (postgres.js), with `mcp()`, with
// `viewer()`, or with Neon's driver (`driver: neonServerless`).
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { readRecipes } from "../package/readme.ts";

export interface WorkerBundle {
  rawBytes: number;
  gzipBytes: number;
  /** Input files with code in the script (paths relative to the project); files read but shaken away entirely are not listed. */
  inputs: string[];
  /** Bytes in the output per npm package or source folder, largest first. */
  contributors: [string, number][];
  /** Wrangler's (esbuild's) warnings, e.g. about a stray JSX pragma. */
  warnings: string[];
}

const ROOT = join(import.meta.dirname, "..", "..");

export type WorkerVariant = "examples" | "recipe" | "recipe+mcp" | "recipe+viewer" | "recipe+neon" | "recipe+agent";

/**
 * The README's Worker recipe (worker.js and wrangler.toml, read from the
 * README) in a temporary folder, its `edda-edge/…` imports pointed at the
 * sources (the subpaths of deno.json's exports); "recipe+mcp" adds
 * `mcp: mcp()`, "recipe+viewer" `viewer: viewer()`, "recipe+neon"
 * `driver: neonServerless`, "recipe+agent" a workflow that runs an agent
 * from `edda-edge/agent`.
 */
async function writeRecipe(dir: string, variant: Exclude<WorkerVariant, "examples">): Promise<void> {
  const { files } = readRecipes(ROOT);
  const entries = (JSON.parse(await readFile(join(ROOT, "deno.json"), "utf8")) as { exports: Record<string, string> }).exports;
  let worker = files["worker.js"]!;
  const call = "createWorker({ workflows: [hello] })";
  if (!worker.includes(call)) throw new Error(`the README's worker.js no longer calls ${call}`);
  if (variant === "recipe+mcp") worker = `import { mcp } from "edda-edge/mcp";\n${worker.replace(call, "createWorker({ workflows: [hello], mcp: mcp() })")}`;
  if (variant === "recipe+viewer") worker = `import { viewer } from "edda-edge/viewer";\n${worker.replace(call, "createWorker({ workflows: [hello], viewer: viewer() })")}`;
  if (variant === "recipe+neon") worker = `import { neonServerless } from "edda-edge/drivers/neon-serverless";\n${worker.replace(call, "createWorker({ workflows: [hello], driver: neonServerless })")}`;
  if (variant === "recipe+agent") {
    const ask = [
      `const helper = defineAgent("helper", { model: () => { throw new Error("bundled, never called"); } });`,
      `const ask = workflow("ask", async (ctx, input) => (await helper.run(ctx, { prompt: input.question })).text);`,
    ].join("\n");
    worker = `import { defineAgent } from "edda-edge/agent";\n${worker.replace(call, "createWorker({ workflows: [hello, ask] })").replace(/^export default/m, `${ask}\nexport default`)}`;
  }
  worker = worker.replace(/from "edda-edge(\/[^"]*)?"/g, (_m, sub: string | undefined) => `from ${JSON.stringify(join(ROOT, entries[`.${sub ?? ""}`]!))}`);
  await writeFile(join(dir, "worker.js"), worker);
  await writeFile(join(dir, "wrangler.toml"), files["wrangler.toml"]!);
}

export async function buildWorkerBundle(variant: WorkerVariant = "examples"): Promise<WorkerBundle> {
  const out = await mkdtemp(join(tmpdir(), "edda-bundle-"));
  try {
    let cwd = ROOT;
    if (variant !== "examples") {
      cwd = join(out, "project");
      await mkdir(cwd);
      await writeRecipe(cwd, variant);
    }
    const { stderr } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js"), "deploy", "--dry-run", "--outdir", out, "--metafile", join(out, "meta.json")],
      { cwd, env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" }, timeout: 120_000 },
    );
    const script = await readFile(join(out, "worker.js"));
    const meta = JSON.parse(await readFile(join(out, "meta.json"), "utf8")) as {
      outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>;
    };
    const output = Object.entries(meta.outputs).find(([k]) => k.endsWith(".js"))![1];
    const by = new Map<string, number>();
    // Paths relative to the repository, wherever wrangler ran.
    const inputs = Object.entries(output.inputs).filter(([, info]) => info.bytesInOutput > 0).map(([file, info]) => [relative(ROOT, resolve(cwd, file)), info] as const);
    for (const [file, info] of inputs) {
      const nm = file.lastIndexOf("node_modules/");
      let key: string;
      if (nm >= 0) {
        const parts = file.slice(nm + "node_modules/".length).split("/");
        key = parts[0]!.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!;
      } else {
        key = file.split("/").slice(0, 2).join("/");
      }
      by.set(key, (by.get(key) ?? 0) + info.bytesInOutput);
    }
    return {
      rawBytes: script.length,
      gzipBytes: gzipSync(script).length,
      inputs: inputs.map(([file]) => file),
      contributors: [...by.entries()].sort((a, b) => b[1] - a[1]),
      warnings: stderr.split("\n").filter((l) => /WARNING/.test(l)),
    };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}
