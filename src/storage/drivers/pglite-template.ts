/**
 * A pre-initialised PGlite data folder, one per machine and PGlite version: a
 * new data folder starts as a copy of it instead of running initdb. PGlite
 * runs initdb in a second WASM instance on every fresh folder — most of a
 * first start's time and its memory peak (BENCHMARKS.md, "Light") — while
 * copying the ~40 MB an initdb leaves takes a fraction of a second. The
 * first fresh folder on a machine pays initdb once and leaves the template
 * behind; every later one (another clone, `rm -rf .data`, another project)
 * copies it.
 *
 * The template is taken right after initdb, before any migration or data, so
 * one template serves every app; the folder name holds the PGlite version,
 * whose catalogue it must match. Written to a temporary name and renamed, so
 * a half-written template is never used; any failure falls back to initdb.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The installed PGlite's version, read beside its entry (its package.json is not exported). */
function pgliteVersion(): string | null {
  try {
    const entry = fileURLToPath(import.meta.resolve("@electric-sql/pglite"));
    for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
      const file = join(dir, "package.json");
      if (!existsSync(file)) continue;
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "@electric-sql/pglite") return pkg.version ?? null;
    }
  } catch {
    // not resolvable from here: no template
  }
  return null;
}

/** The template folder for this PGlite under `cacheRoot`, or null when the version is unknown. */
export function templateFolder(cacheRoot: string): string | null {
  const version = pgliteVersion();
  return version ? join(cacheRoot, `pglite-${version}`) : null;
}

/** Whether `dataDir` holds no database yet (absent or empty: PGlite would run initdb there). */
export function needsInitdb(dataDir: string): boolean {
  return !existsSync(dataDir) || readdirSync(dataDir).length === 0;
}

/** Copy the template into the empty `dataDir`; false when there is no template (or the copy failed). */
export function seedFromTemplate(template: string, dataDir: string): boolean {
  if (!existsSync(join(template, "PG_VERSION"))) return false;
  try {
    cpSync(template, dataDir, { recursive: true });
    return true;
  } catch {
    rmSync(dataDir, { recursive: true, force: true });
    mkdirSync(dataDir, { recursive: true });
    return false;
  }
}

/** Keep a copy of `dataDir`, just initialised and cleanly shut down, as the template. */
export function saveTemplate(dataDir: string, template: string): void {
  const partial = `${template}.partial-${process.pid}-${Date.now()}`;
  try {
    mkdirSync(dirname(template), { recursive: true });
    cpSync(dataDir, partial, { recursive: true });
    renameSync(partial, template);
  } catch {
    // Another process saved it first, or the cache is not writable: initdb next time, nothing lost.
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
}
