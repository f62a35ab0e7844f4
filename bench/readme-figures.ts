/**
 * The guides' generated figures: the text between `<!-- name:start … -->`
 * and `<!-- name:end -->` is written by a bench script, never by hand, and
 * read back by the tests that check it against a fresh measurement. The
 * README is a map; each block lives in the guide whose section it belongs
 * to, listed here so that a writer and its test always open the same file.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..");

/** Each block and the Markdown file (from the repository root) that holds it. */
export const FIGURE_HOMES = {
  "worker-bundle": "docs/deploy-cloudflare.md",
  "step-cpu": "docs/deploy-cloudflare.md",
  "sweep-cost": "docs/deploy-cloudflare.md",
} as const;
export type FigureBlock = keyof typeof FIGURE_HOMES;

/** `--update-docs` (or its older name, `--update-readme`): write the blocks, not only print the figures. */
export function wantsDocsUpdate(argv: readonly string[] = process.argv): boolean {
  return argv.includes("--update-docs") || argv.includes("--update-readme");
}

function bounds(text: string, name: FigureBlock): [number, number] {
  const start = text.indexOf(`<!-- ${name}:start`);
  const end = text.indexOf(`<!-- ${name}:end -->`);
  if (start < 0 || end < start) throw new Error(`${FIGURE_HOMES[name]} has no <!-- ${name}:start --> … <!-- ${name}:end --> block`);
  return [text.indexOf("\n", start) + 1, end];
}

export function readFigureBlock(name: FigureBlock): string {
  const text = readFileSync(join(ROOT, FIGURE_HOMES[name]), "utf8");
  const [a, b] = bounds(text, name);
  return text.slice(a, b);
}

export function writeFigureBlock(name: FigureBlock, body: string): void {
  const file = join(ROOT, FIGURE_HOMES[name]);
  const text = readFileSync(file, "utf8");
  const [a, b] = bounds(text, name);
  writeFileSync(file, text.slice(0, a) + body + text.slice(b));
  console.log(`${FIGURE_HOMES[name]}: ${name} block updated`);
}

/** Every "**N KiB raw, M KiB gzipped**" of a block, in order, as bytes. */
export function statedSizes(block: string): { rawBytes: number; gzipBytes: number }[] {
  return [...block.matchAll(/\*\*([\d,.]+) KiB raw, ([\d,.]+) KiB gzipped\*\*/g)].map((m) => ({
    rawBytes: Number(m[1]!.replaceAll(",", "")) * 1024,
    gzipBytes: Number(m[2]!.replaceAll(",", "")) * 1024,
  }));
}
