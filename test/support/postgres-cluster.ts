// Throwaway Postgres server for the test run: initdb into a temp dir, start on a
// free 127.0.0.1 port with durability turned off for speed (unless `durable`), stop and delete on
// teardown. Uses the Debian server binaries (/usr/lib/postgresql/<v>/bin); as
// root they run as the `postgres` user, because Postgres refuses to run as root.
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { appendFile, chown, mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

/** Highest-version server bin dir, or an Error telling how to install one. */
export function findPostgresBin(): string {
  const versions = existsSync(PG_ROOT)
    ? readdirSync(PG_ROOT).filter((v) => existsSync(join(PG_ROOT, v, "bin", "initdb")))
    : [];
  versions.sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  const best = versions[0];
  if (best === undefined) {
    throw new Error(
      `No Postgres server binaries found under ${PG_ROOT}/*/bin. ` +
        "Install them with: apt-get update && apt-get install -y postgresql " +
        "(or set DATABASE_URL_TEST to an existing server).",
    );
  }
  return join(PG_ROOT, best, "bin");
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
  const bin = findPostgresBin();
  const asRoot = process.getuid?.() === 0;
  // As root the server runs as `postgres`, which must be able to reach the dir,
  // so use /tmp rather than a possibly private $TMPDIR.
  const dir = await mkdtemp(join(asRoot ? "/tmp" : tmpdir(), "edda-pg-"));
  const data = join(dir, "data");
  const log = join(dir, "server.log");
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    await chown(dir, uid, gid);
  }
  const run = (tool: string, args: string[]) =>
    new Promise<string>((resolve, reject) => {
      const [cmd, argv] = asRoot
        ? ["runuser", ["-u", "postgres", "--", join(bin, tool), ...args]]
        : [join(bin, tool), args];
      // execFile's error message already carries the command and its stderr.
      execFile(cmd, argv, { cwd: dir, timeout: 120_000 }, (err, stdout) =>
        err ? reject(new Error(`${tool} failed: ${err.message}${stdout}`)) : resolve(stdout),
      );
    });

  let stopped = false;
  const stopSync = () => {
    if (stopped) return;
    stopped = true;
    try {
      const args = ["-D", data, "-m", "immediate", "stop"];
      const [cmd, argv] = asRoot
        ? ["runuser", ["-u", "postgres", "--", join(bin, "pg_ctl"), ...args]]
        : [join(bin, "pg_ctl"), args];
      execFileSync(cmd, argv, { stdio: "ignore" });
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
