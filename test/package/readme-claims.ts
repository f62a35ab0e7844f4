// The claims the shell walk-throughs of the README and the guides (docs/*.md)
// make about each command, read from their own comments so that a test can
// hold each document to them:
//
//   curl … -d '…'
//   #   → 201 {"instanceId":"ix1","status":"queued"}, then 200 {…}   (answers of the last commands)
//   #   → pw9 completes with {"orderId":"o9","amount":42}            (an instance's eventual output)
//   curl -s localhost:8787/instances/fan1:child_pipeline:2     # → "parentInstanceId":"fan1"
//
// A pattern is JSON where `…` stands for any value, for the rest of an object
// or an array, or, inside a string, for any text. Objects match partially (the
// documents abridge views); arrays match whole unless they end with `…`.

export type Pattern =
  | { kind: "any" }
  | { kind: "text"; parts: string[] }
  | { kind: "literal"; value: number | boolean | null }
  | { kind: "object"; members: [string, Pattern][] }
  | { kind: "array"; items: Pattern[]; rest: boolean };

/** What a → comment says about the answers of the commands just before it, oldest first. */
export interface AnswerClaim {
  status?: number;
  /** A JSON body pattern, or a text the output holds (`"… 0 would diverge"`). */
  body?: Pattern;
  /** SSE lines (`event: chunk / data: {…} / id: 1`) that follow each other in the output. */
  lines?: string[];
}

export interface Step {
  command: string;
  /** Claims about the answers of this command (and the ones before it, for "then"). */
  answers: AnswerClaim[];
  /** "<id> completes with {output}". */
  completions: { instanceId: string; output: Pattern }[];
  /** The document line, for failure messages. */
  source: string;
}

const ELLIPSIS = "…";

/** Parses one pattern value at `i`; returns it and where it ends, or null when the text there is not one. */
export function parsePattern(text: string, i = 0): [Pattern, number] | null {
  const ws = (j: number) => {
    while (j < text.length && /\s/.test(text[j]!)) j++;
    return j;
  };
  const value = (j: number): [Pattern, number] | null => {
    j = ws(j);
    const c = text[j];
    if (c === ELLIPSIS) return [{ kind: "any" }, j + 1];
    if (c === '"') {
      const end = text.indexOf('"', j + 1);
      if (end < 0) return null;
      const raw = text.slice(j + 1, end);
      return [raw === ELLIPSIS ? { kind: "any" } : { kind: "text", parts: raw.split(ELLIPSIS) }, end + 1];
    }
    if (c === "{") return members(j + 1, "}");
    if (c === "[") {
      const items: Pattern[] = [];
      let k = ws(j + 1);
      if (text[k] === "]") return [{ kind: "array", items, rest: false }, k + 1];
      for (;;) {
        k = ws(k);
        if (text[k] === ELLIPSIS && /^\s*\]/.test(text.slice(k + 1))) return [{ kind: "array", items, rest: true }, ws(k + 1) + 1];
        const v = value(k);
        if (!v) return null;
        items.push(v[0]);
        k = ws(v[1]);
        if (text[k] === "]") return [{ kind: "array", items, rest: false }, k + 1];
        if (text[k] !== ",") return null;
        k++;
      }
    }
    const lit = /^(-?\d+(?:\.\d+)?|true|false|null)/.exec(text.slice(j));
    return lit ? [{ kind: "literal", value: JSON.parse(lit[1]!) as number | boolean | null }, j + lit[1]!.length] : null;
  };
  // `"k":v, "k2":v2` up to `close` (or, with no close, as far as members go: the bare pairs of a comment).
  const members = (j: number, close?: string): [Pattern, number] | null => {
    const out: [string, Pattern][] = [];
    let k = j;
    for (;;) {
      k = ws(k);
      if (close && text[k] === close) return [{ kind: "object", members: out }, k + 1];
      if (text[k] === ELLIPSIS) k++;
      else {
        const key = /^"([^"]*)"\s*:/.exec(text.slice(k));
        if (!key) return close ? null : out.length ? [{ kind: "object", members: out }, k] : null;
        const v = value(k + key[0].length);
        if (!v) return null;
        out.push([key[1]!, v[0]]);
        k = v[1];
      }
      const after = ws(k);
      if (close && text[after] === close) return [{ kind: "object", members: out }, after + 1];
      if (text[after] !== ",") return close ? null : [{ kind: "object", members: out }, k];
      k = after + 1;
    }
  };
  if (/^\s*"[^"]*"\s*:/.test(text.slice(i))) return members(i);
  return value(i);
}

/** Where `actual` differs from `pattern` (a path and what was expected), or null when it matches. */
export function mismatch(pattern: Pattern, actual: unknown, path = "$"): string | null {
  switch (pattern.kind) {
    case "any":
      return null;
    case "literal":
      return actual === pattern.value ? null : `${path}: expected ${JSON.stringify(pattern.value)}, got ${JSON.stringify(actual)}`;
    case "text": {
      if (typeof actual !== "string") return `${path}: expected a string, got ${JSON.stringify(actual)}`;
      const re = new RegExp(`^${pattern.parts.map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[\\s\\S]*")}$`);
      return re.test(actual) ? null : `${path}: expected "${pattern.parts.join(ELLIPSIS)}", got ${JSON.stringify(actual)}`;
    }
    case "object": {
      if (typeof actual !== "object" || actual === null || Array.isArray(actual)) return `${path}: expected an object, got ${JSON.stringify(actual)}`;
      for (const [k, p] of pattern.members) {
        if (!(k in actual)) return `${path}.${k}: missing`;
        const m = mismatch(p, (actual as Record<string, unknown>)[k], `${path}.${k}`);
        if (m) return m;
      }
      return null;
    }
    case "array": {
      if (!Array.isArray(actual)) return `${path}: expected an array, got ${JSON.stringify(actual)}`;
      if (pattern.rest ? actual.length < pattern.items.length : actual.length !== pattern.items.length) return `${path}: expected ${pattern.items.length}${pattern.rest ? " or more" : ""} items, got ${actual.length}`;
      for (const [n, p] of pattern.items.entries()) {
        const m = mismatch(p, actual[n], `${path}[${n}]`);
        if (m) return m;
      }
      return null;
    }
  }
}

/** The claims of one → text: answers ("A, then B", "A twice, then B") and completions. */
export function parseArrow(text: string): { answers: AnswerClaim[]; completions: Step["completions"] } {
  const completions: Step["completions"] = [];
  for (const m of text.matchAll(/(\S+) completes with (?=\{)/g)) {
    const p = parsePattern(text, m.index + m[0].length);
    if (p) completions.push({ instanceId: m[1]!, output: p[0] });
  }
  const answers: AnswerClaim[] = [];
  for (const segment of text.split(/,?\s+then\s+/)) {
    const claim: AnswerClaim = {};
    let rest = segment.trimStart();
    const status = /^(\d{3})\b/.exec(rest);
    if (status) {
      claim.status = Number(status[1]);
      rest = rest.slice(status[0].length).trimStart();
    }
    if (/^event: /.test(rest)) claim.lines = rest.split(" / ").map((l) => l.trim());
    else if (rest.startsWith("{") || rest.startsWith('"')) {
      const p = parsePattern(rest);
      if (p) {
        claim.body = p[0];
        rest = rest.slice(p[1]);
      }
    }
    if (claim.status === undefined && !claim.body && !claim.lines) break; // prose: no (further) answer claims
    answers.push(claim);
    if (/^\s*twice\b/.test(rest)) answers.push(claim);
  }
  return { answers, completions };
}

/** The shell lines of a document section's first sh block, each with the claims its comments make. */
export function readSteps(readme: string, heading: string): Step[] {
  const start = readme.indexOf(heading);
  if (start < 0) throw new Error(`no "${heading}" section`);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(start))?.[1];
  if (!block) throw new Error(`"${heading}" has no sh block`);
  const steps: Step[] = [];
  const lines = block.replace(/\\\n\s*/g, "").split("\n");
  for (const line of lines) {
    const comment = /^\s*#\s*(.*)$/.exec(line);
    if (comment) {
      const arrow = /^→\s*(.*)$/.exec(comment[1]!);
      const last = steps.at(-1);
      if (arrow && last) {
        const c = parseArrow(arrow[1]!);
        last.answers.push(...c.answers);
        last.completions.push(...c.completions);
      }
      continue;
    }
    if (!line.trim()) continue;
    const trailing = /^(.*?\S)\s+#\s(.*)$/.exec(line);
    const command = trailing ? trailing[1]! : line.trim();
    const step: Step = { command, answers: [], completions: [], source: line.trim() };
    const arrow = trailing ? /→\s*(.*)$/.exec(trailing[2]!) : null;
    if (arrow) Object.assign(step, parseArrow(arrow[1]!));
    steps.push(step);
  }
  return steps;
}
