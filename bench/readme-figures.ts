/**
 * The README's generated figures: the text between `<!-- name:start … -->`
 * and `<!-- name:end -->` is written by a bench script, never by hand, and
 * read back by the tests that check it against a fresh measurement.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const README = join(import.meta.dirname, "..", "README.md");

function bounds(text: string, name: string): [number, number] {
  const start = text.indexOf(`<!-- ${name}:start`);
  const end = text.indexOf(`<!-- ${name}:end -->`);
  if (start < 0 || end < start) throw new Error(`README.md has no <!-- ${name}:start --> … <!-- ${name}:end --> block`);
  return [text.indexOf("\n", start) + 1, end];
}

export function readFigureBlock(name: string): string {
  const text = readFileSync(README, "utf8");
  const [a, b] = bounds(text, name);
  return text.slice(a, b);
}

export function writeFigureBlock(name: string, body: string): void {
  const text = readFileSync(README, "utf8");
  const [a, b] = bounds(text, name);
  writeFileSync(README, text.slice(0, a) + body + text.slice(b));
}

/** Every "**N KiB raw, M KiB gzipped**" of a block, in order, as bytes. */
export function statedSizes(block: string): { rawBytes: number; gzipBytes: number }[] {
  return [...block.matchAll(/\*\*([\d,.]+) KiB raw, ([\d,.]+) KiB gzipped\*\*/g)].map((m) => ({
    rawBytes: Number(m[1]!.replaceAll(",", "")) * 1024,
    gzipBytes: Number(m[2]!.replaceAll(",", "")) * 1024,
  }));
}
