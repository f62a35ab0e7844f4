// The recipes users copy, read from the README and the guides themselves so
// the package tests run exactly what is written: every fenced block whose
// info string names a file (```js file=server.mjs), and the shell lines.
import { readFileSync } from "node:fs";
import { join } from "node:path";

export interface Recipes {
  /** File name → contents, as written in the document. */
  files: Record<string, string>;
  /** Shell commands, one per line, comments stripped. */
  commands: string[];
}

/** A section of a Markdown document: from `heading` to the next heading of level 2 (or the end). */
export function readSection(root: string, file: string, heading: string): string {
  const text = readFileSync(join(root, file), "utf8");
  const start = text.indexOf(heading);
  if (start < 0) throw new Error(`${file} has no "${heading}" section`);
  const end = text.indexOf("\n## ", start + 1);
  return text.slice(start, end < 0 ? undefined : end);
}

/** The recipes of one section; by default the README's "Install in your project". */
export function readRecipes(root: string, heading = "## Install in your project", file = "README.md"): Recipes {
  const section = readSection(root, file, heading);
  const files: Record<string, string> = {};
  const commands: string[] = [];
  for (const m of section.matchAll(/```(\w+)([^\n]*)\n([\s\S]*?)```/g)) {
    const [, lang, info, body] = m as unknown as [string, string, string, string];
    const file = /file=(\S+)/.exec(info)?.[1];
    if (file) files[file] = body;
    else if (lang === "sh") commands.push(...body.split("\n").map((l) => l.replace(/\s+#.*$/, "").trim()).filter(Boolean));
  }
  return { files, commands };
}
