// docs/design.md's worked example of a new wait kind ("A new wait kind") stays
// true: every file it lists exists (or, for the kind's new operation file, the
// sibling it follows does) and holds the part the compiler ties to the kinds;
// the count it states is the length of its list; and no source file outside the
// list holds a table the compiler makes a new kind fill in (a mapped type over
// WaitKind), so a kind cannot need a file the example does not name.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const design = readFileSync(join(ROOT, "docs/design.md"), "utf8");
const block = /<!-- new-wait-kind:files -->\n([\s\S]*?)<!-- \/new-wait-kind:files -->\n\n(\w+) hand-written source files/.exec(design);
const bullets = [...(block?.[1] ?? "").matchAll(/^- `([^`]+)`: (.*)$/gm)].map((m) => ({ path: m[1]!, text: m[2]! }));

/** What each listed file must hold for the example to be what the compiler asks for. */
const ANCHORS: Record<string, RegExp> = {
  "src/core/model.ts": /const DECLARED_WAIT_KINDS = \[[\s\S]*satisfies readonly WaitKindDeclaration\[\]/,
  "src/core/replay.ts": /export type WaitRequest =/,
  "src/engine/wait-kinds.ts": /\[K in WaitKind\]: WaitKindHandlers<K>[\s\S]*WAIT_HANDLERS: WaitKindTable/,
  "src/storage/lifecycle.ts": /resolveWaits\(\{[\s\S]*?status = \$\{WAITING\.child\} AND i\.current_activity_id = b\.wait_id/,
  "src/engine/why.ts": /WAIT_REASONS: \{ \[K in WaitKind\]: WaitReason \}/,
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return /\.tsx?$/.test(e.name) ? [path.slice(ROOT.length + 1)] : [];
  });
}

const NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];

describe("docs/design.md: a new wait kind", () => {
  it("lists the files of its worked example, and states their number", () => {
    expect(block, "the new-wait-kind:files block and the count after it").not.toBeNull();
    expect(bullets.length).toBeGreaterThan(0);
    expect(NUMBERS.indexOf(block![2]!.toLowerCase())).toBe(bullets.length);
  });

  it("each listed file holds what the compiler ties to the kinds, or follows a sibling that does", () => {
    for (const { path, text } of bullets) {
      if (!existsSync(join(ROOT, path))) {
        // The kind's own new file: it must name the existing file it is written like.
        const sibling = /like `([^`]+)`/.exec(text)?.[1];
        expect(sibling, `${path} is new: its line names the file it follows`).toBeDefined();
        expect(readFileSync(join(ROOT, "src", sibling!), "utf8")).toMatch(/operation<\w+>\(ctx, \{/);
        continue;
      }
      expect(ANCHORS[path], `an anchor for ${path}`).toBeDefined();
      expect(readFileSync(join(ROOT, path), "utf8")).toMatch(ANCHORS[path]!);
    }
  });

  it("no source file outside the list holds a table a new kind must fill in", () => {
    const listed = new Set(bullets.map((b) => b.path));
    const tables = sources(join(ROOT, "src")).filter((path) => /\[K in WaitKind\]/.test(readFileSync(join(ROOT, path), "utf8")));
    expect(tables.length).toBeGreaterThan(0);
    expect(tables.filter((path) => !listed.has(path))).toEqual([]);
  });
});
