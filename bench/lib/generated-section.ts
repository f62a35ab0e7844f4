/**
 * A generated section of a Markdown file: the text between a begin marker and
 * an end marker is written by a script, never by hand. The markers stay; what
 * lies between them is replaced by `body`.
 */
import { readFileSync, writeFileSync } from "node:fs";

export function writeGeneratedSection(path: string, begin: string, end: string, body: string): void {
  const text = readFileSync(path, "utf8");
  const at = text.indexOf(begin);
  const endAt = text.indexOf(end);
  if (at < 0 || endAt < at) throw new Error(`${path} has no ${begin} … ${end} section`);
  writeFileSync(path, `${text.slice(0, at + begin.length)}\n${body}\n${text.slice(endAt)}`);
}
