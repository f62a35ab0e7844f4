// No import circle anywhere in src/: a module graph with a cycle has no
// order in which each module is read before the modules that use it, so a
// contributor cannot change one layer without reading the others. Every
// relative import counts — type-only imports, re-exports and literal
// dynamic imports too — as TypeScript's own pre-processor reports them.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const SRC = resolve(import.meta.dirname, "../../src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The src/ files each src/ file imports (relative specifiers only; packages are outside the graph). */
function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets = info.importedFiles
      .map((f) => f.fileName)
      .filter((s) => s.startsWith("."))
      .map((s) => resolve(dirname(file), s))
      .map((p) => (known.has(p) ? p : [`${p}.ts`, `${p}.tsx`, join(p, "index.ts")].find((c) => known.has(c))))
      .filter((p): p is string => p !== undefined);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Every cycle found by a depth-first walk, each as the path that closes it. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      const s = state.get(next);
      if (s === "open") found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (s === undefined) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return found;
}

describe("src/ import graph", () => {
  it("has no import circle (type imports and re-exports included)", () => {
    const files = sourceFiles(SRC);
    const graph = importGraph(files);
    const edges = [...graph.values()].reduce((n, t) => n + t.length, 0);
    // The walk saw the tree: a broken resolver would find no cycle in an empty graph.
    expect(files.length).toBeGreaterThan(100);
    expect(edges).toBeGreaterThan(files.length);
    const found = cycles(graph).map((c) => c.map((f) => relative(SRC, f)).join(" → "));
    expect(found).toEqual([]);
  });

  it("the walk finds a circle when there is one", () => {
    const a = join(SRC, "a.ts");
    const b = join(SRC, "b.ts");
    const c = join(SRC, "c.ts");
    expect(cycles(new Map([[a, [b]], [b, [c]], [c, [a]]])).map((cy) => cy.map((f) => relative(SRC, f)))).toEqual([["a.ts", "b.ts", "c.ts", "a.ts"]]);
    expect(cycles(new Map([[a, [b, c]], [b, [c]], [c, []]]))).toEqual([]);
  });

  // http/ and the client talk to the engine, never to storage (design.md "Narrow dependencies").
  it("no file under src/http or src/client imports src/storage", () => {
    const files = sourceFiles(SRC);
    const graph = importGraph(files);
    const storage = join(SRC, "storage") + "/";
    const outer = files.filter((f) => f.startsWith(join(SRC, "http") + "/") || f.startsWith(join(SRC, "client") + "/"));
    expect(outer.length).toBeGreaterThan(20);
    const reaching = outer.flatMap((f) => (graph.get(f) ?? []).filter((t) => t.startsWith(storage)).map((t) => `${relative(SRC, f)} → ${relative(SRC, t)}`));
    expect(reaching).toEqual([]);
  });

  it("src/http reaches no storage through the engine (`.storage.` or `.storage)`)", () => {
    const http = sourceFiles(join(SRC, "http"));
    const hits = http.flatMap((f) =>
      readFileSync(f, "utf8")
        .split("\n")
        .flatMap((line, i) => (/\.storage\b/.test(line) ? [`${relative(SRC, f)}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(hits).toEqual([]);
    // The pattern sees what it should: a line like the ones it forbids matches.
    expect(/\.storage\b/.test("await e.storage.getInstance(id)")).toBe(true);
  });
});
