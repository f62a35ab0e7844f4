// The README is a map: every guide in docs/ is linked from it, and every
// relative link in README.md and docs/*.md leads somewhere — to a file that
// exists and, with a #fragment, to a heading of that file as GitHub names its
// anchors (lower case, punctuation dropped, spaces as hyphens, repeats -1, -2).
// Links inside code (fenced blocks, `spans`) are text, not links.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const GUIDES = readdirSync(join(ROOT, "docs"))
  .filter((f) => f.endsWith(".md"))
  .sort()
  .map((f) => `docs/${f}`);
const DOCUMENTS = ["README.md", ...GUIDES];

/** The text outside fenced code blocks and code spans. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").replace(/(`+)[\s\S]*?\1/g, "");
}

/** GitHub's anchor for a heading's text. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a document's headings give. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const withoutFences = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "");
  for (const m of withoutFences.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

/** The relative links of a document: `[text](target)` and `![alt](target)`, without external URLs. */
function relativeLinks(markdown: string): string[] {
  return [...prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
    .map((m) => m[1]!)
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

const read = (file: string) => readFileSync(join(ROOT, file), "utf8");

describe("links of the README and the guides", () => {
  it("names anchors as GitHub does", () => {
    expect(slug("Try it (`npm start`, then curl)")).toBe("try-it-npm-start-then-curl");
    expect(slug("Repairs: rerun, fork, bulk actions, priority, schedule control")).toBe("repairs-rerun-fork-bulk-actions-priority-schedule-control");
    expect(slug("MCP (`src/http/mcp/`)")).toBe("mcp-srchttpmcp");
    expect([...anchors("# A\n```\n# not a heading\n```\n## A\n")]).toEqual(["a", "a-1"]);
  });

  it("the README links every guide in docs/", () => {
    const linked = new Set(relativeLinks(read("README.md")).map((t) => t.split("#")[0]));
    expect(GUIDES.filter((g) => !linked.has(g))).toEqual([]);
  });

  for (const file of DOCUMENTS) {
    it(`every relative link of ${file} resolves`, () => {
      const broken: string[] = [];
      for (const target of relativeLinks(read(file))) {
        const [path, fragment] = target.split("#", 2) as [string, string | undefined];
        const resolved = path ? join(ROOT, dirname(file), decodeURIComponent(path)) : join(ROOT, file);
        if (!existsSync(resolved)) {
          broken.push(`${target}: no file ${relative(ROOT, resolved)}`);
          continue;
        }
        if (fragment === undefined || !resolved.endsWith(".md") || statSync(resolved).isDirectory()) continue;
        if (!anchors(readFileSync(resolved, "utf8")).has(decodeURIComponent(fragment))) broken.push(`${target}: no heading #${fragment} in ${relative(ROOT, resolved)}`);
      }
      expect(broken).toEqual([]);
    });
  }
});
