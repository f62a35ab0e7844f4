/**
 * The versions of the peers the bench runs, read from the installed packages
 * (node_modules/<name>/package.json), so a table's labels name what was
 * measured rather than what a comment once said.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

export const PEER_PACKAGES = { dbos: "@dbos-inc/dbos-sdk", absurd: "absurd-sdk", graphile: "graphile-worker" } as const;
export type PeerName = keyof typeof PEER_PACKAGES;

/** The installed version of `pkg`, or "?" when it is not installed. */
export function installedVersion(pkg: string): string {
  try {
    const v = (JSON.parse(readFileSync(join(root, "node_modules", pkg, "package.json"), "utf8")) as { version?: unknown }).version;
    return typeof v === "string" ? v : "?";
  } catch {
    return "?";
  }
}

/** Every peer's installed version, by peer. */
export function peerVersions(): Record<PeerName, string> {
  return { dbos: installedVersion(PEER_PACKAGES.dbos), absurd: installedVersion(PEER_PACKAGES.absurd), graphile: installedVersion(PEER_PACKAGES.graphile) };
}
