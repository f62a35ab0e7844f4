// The README's "Install in your project" recipes, read from the README itself
// so the package tests run exactly what users copy: every fenced block whose
// info string names a file (```js file=server.mjs), and the shell lines.
import { readFileSync } from "node:fs";
import { join } from "node:path";

export interface Recipes {
  /** File name → contents, as written in the README. */
  files: Record<string, string>;
  /** Shell commands, one per line, comments stripped. */
  commands: string[];
}

export function readRecipes(root: string, heading = "## Install in your project"): Recipes {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const start = readme.indexOf(heading);
  if (start < 0) throw new Error(`README.md has no "${heading}" section`);
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
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
