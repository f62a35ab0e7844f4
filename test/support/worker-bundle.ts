// Builds the Worker bundle exactly as a deploy would (`wrangler deploy
// --dry-run --outdir`) and measures it: raw and gzipped size of the script,
// and which source files and packages went into it (from esbuild's metafile).
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";

export interface WorkerBundle {
  rawBytes: number;
  gzipBytes: number;
  /** Bundled input files (paths relative to the project). */
  inputs: string[];
  /** Bytes in the output per npm package or source folder, largest first. */
  contributors: [string, number][];
}

const ROOT = join(import.meta.dirname, "..", "..");

export async function buildWorkerBundle(): Promise<WorkerBundle> {
  const out = await mkdtemp(join(tmpdir(), "edda-bundle-"));
  try {
    await promisify(execFile)(
      process.execPath,
      [join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js"), "deploy", "--dry-run", "--outdir", out, "--metafile", join(out, "meta.json")],
      { cwd: ROOT, env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" }, timeout: 120_000 },
    );
    const script = await readFile(join(out, "worker.js"));
    const meta = JSON.parse(await readFile(join(out, "meta.json"), "utf8")) as {
      outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>;
    };
    const output = Object.entries(meta.outputs).find(([k]) => k.endsWith(".js"))![1];
    const by = new Map<string, number>();
    for (const [file, info] of Object.entries(output.inputs)) {
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
      inputs: Object.keys(output.inputs),
      contributors: [...by.entries()].sort((a, b) => b[1] - a[1]),
    };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}
